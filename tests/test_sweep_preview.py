"""``hpcprof-kit sweep --dry-run`` and ``render --vary``: the variants, each one's command and
the script the scheduler would get, on each kind of system, with nothing submitted and no run
or sweep directory made."""

from __future__ import annotations

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.jobs import JobSpec

NOTHING = "(a preview: nothing is run and nothing is written)"
SUBMITTED = (
    "the script submitted (array.sh in the sweep directory; each variant's run directory is made "
    "at submission):"
)
SWEEP_LINE = (
    "# A sweep of seqpar: each variant runs its own job.sh in its own run directory (stdout, "
    "stderr, job_end.json there)."
)

SLURM = f"""\
sweep of seqpar on slurm: 4 variants, one Slurm job array (sbatch)
{NOTHING}
  0  nodes=1 --dtype=float32   python3 -m hpcprof_kit.apps.seqpar --dtype float32
  1  nodes=1 --dtype=bfloat16  python3 -m hpcprof_kit.apps.seqpar --dtype bfloat16
  2  nodes=2 --dtype=float32   python3 -m hpcprof_kit.apps.seqpar --dtype float32
  3  nodes=2 --dtype=bfloat16  python3 -m hpcprof_kit.apps.seqpar --dtype bfloat16
{SUBMITTED}
#!/bin/bash
#SBATCH -J sweep-seqpar
#SBATCH -N 2
#SBATCH --ntasks-per-node=2
#SBATCH -t 00:10:00
#SBATCH --array=0-3%2
#SBATCH -o array-%A_%a.out
#SBATCH -e array-%A_%a.out
{SWEEP_LINE}
set -o pipefail
case "${{SLURM_ARRAY_TASK_ID:?this script runs as a job array}}" in
    0) run_dir='<sweep>/<run of variant 0>' ;;  # nodes=1 --dtype=float32
    1) run_dir='<sweep>/<run of variant 1>' ;;  # nodes=1 --dtype=bfloat16
    2) run_dir='<sweep>/<run of variant 2>' ;;  # nodes=2 --dtype=float32
    3) run_dir='<sweep>/<run of variant 3>' ;;  # nodes=2 --dtype=bfloat16
    *) echo "array index $SLURM_ARRAY_TASK_ID: no variant to run (it completed before)"; exit 0 ;;
esac
export HPCPROF_RUN_DIR="$run_dir"
# srun takes the array's (widest) task count from these over the variant's own line
unset SLURM_NTASKS SLURM_NPROCS
cd "$run_dir"
bash job.sh >stdout 2>stderr
"""

POLARIS = f"""\
sweep of seqpar on polaris: 2 variants, one PBS job array (qsub)
{NOTHING}
  0  --seed=0  python3 -m hpcprof_kit.apps.seqpar --seed 0
  1  --seed=1  python3 -m hpcprof_kit.apps.seqpar --seed 1
{SUBMITTED}
#!/bin/bash -l
#PBS -N sweep-seqpar
#PBS -A P
#PBS -q debug
#PBS -l select=1:system=polaris
#PBS -l place=scatter
#PBS -l walltime=00:10:00
#PBS -l filesystems=home:eagle
#PBS -k doe
#PBS -J 0-1
{SWEEP_LINE}
set -o pipefail
case "${{PBS_ARRAY_INDEX:?this script runs as a job array}}" in
    0) run_dir='<sweep>/<run of variant 0>' ;;  # --seed=0
    1) run_dir='<sweep>/<run of variant 1>' ;;  # --seed=1
    *) echo "array index $PBS_ARRAY_INDEX: no variant to run (it completed before)"; exit 0 ;;
esac
export HPCPROF_RUN_DIR="$run_dir"
cd "$run_dir"
bash job.sh >stdout 2>stderr
"""

AURORA = f"""\
sweep of seqpar on aurora: 2 variants, one PBS job running them in turn (qsub)
{NOTHING}
  0  --dtype=float32   python3 -m hpcprof_kit.apps.seqpar --dtype float32
  1  --dtype=bfloat16  python3 -m hpcprof_kit.apps.seqpar --dtype bfloat16
{SUBMITTED}
#!/bin/bash -l
#PBS -N sweep-seqpar
#PBS -A P
#PBS -q debug
#PBS -l select=1
#PBS -l place=scatter
#PBS -l walltime=00:20:00
#PBS -l filesystems=home:flare
#PBS -k doe
{SWEEP_LINE}
set -o pipefail
# Queue debug takes one job per user, and PBS counts an array of N as N jobs: the
# 2 variants run one after another inside this single job.
# Each variant claims its turn file first (created once): one the user cancelled
# before its turn holds 'skipped' and is passed over; the others still run.
rc=0
for run_dir in '<sweep>/<run of variant 0>' '<sweep>/<run of variant 1>'; do
    if ! (set -C; echo started >"$run_dir/turn") 2>/dev/null; then
        echo "skipped $run_dir: cancelled before its turn"; continue
    fi
    (export HPCPROF_RUN_DIR="$run_dir"; cd "$run_dir" && bash job.sh >stdout 2>stderr) || rc=1
done
exit "$rc"
"""

CASES = {
    "slurm": (["--system", "slurm", "--vary", "nodes=1,2", "--vary=--dtype=float32,bfloat16",
               "--max-concurrent", "2"], SLURM),
    "polaris": (["--system", "polaris", "--account", "P", "--vary=--seed=0,1"], POLARIS),
    "aurora": (["--system", "aurora", "--account", "P", "--vary=--dtype=float32,bfloat16"],
               AURORA),
}  # fmt: skip


@pytest.mark.parametrize("system", sorted(CASES))
def test_dry_run_prints_the_variants_and_the_array_script(isolated_runs, capsys, system):
    words, expected = CASES[system]
    assert main(["sweep", "--example", "seqpar", *words, "--dry-run"]) == 0
    assert capsys.readouterr().out == expected
    assert not isolated_runs.exists()  # no sweep directory, no run directory


@pytest.mark.parametrize("system", ["aurora", "polaris"])
def test_render_vary_prints_the_same_preview(isolated_runs, capsys, system):
    words, expected = CASES[system]
    assert main(["render", "--example", "seqpar", *words]) == 0
    assert capsys.readouterr().out == expected
    assert not isolated_runs.exists()


def test_local_dry_run_shows_the_first_variants_own_script(isolated_runs, capsys):
    words = ["--system", "local", "--ranks-per-node", "1", "--binding", "none",
             "--vary=--epochs=1,2", "--vary=--seed=0"]  # fmt: skip
    assert main(["sweep", *words, "--dry-run"]) == 0
    out = capsys.readouterr().out
    first = JobSpec(system="local", ranks_per_node=1, binding="none", args=("--epochs", "1",
                                                                            "--seed", "0"))  # fmt: skip
    assert out == (
        "sweep of train on local: 2 variants, run one after another on this machine\n"
        f"{NOTHING}\n"
        "  0  --epochs=1 --seed=0  python3 -m hpcprof_kit.apps.train --epochs 1 --seed 0\n"
        "  1  --epochs=2 --seed=0  python3 -m hpcprof_kit.apps.train --epochs 2 --seed 0\n"
        "each variant runs its own job.sh in its own run directory; variant 0's:\n" + first.render()
    )
    assert main(["render", *words]) == 0
    assert capsys.readouterr().out == out
    assert not isolated_runs.exists()


def test_resume_dry_run_shows_only_what_would_run_again(isolated_runs, capsys):
    sweep = JobSpec(system="slurm", example="seqpar").sweep(**{"--seed": ["0", "1", "2"]})
    sweep.create()
    sweep.mark(0, state="COMPLETED")
    sweep.mark(2, state="RUNNING")
    before = sorted(p.name for p in sweep.path.iterdir())
    assert main(["sweep", "--resume", str(sweep.path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:3] == [
        "sweep of seqpar on slurm: 1 variant, one Slurm job array (sbatch)",
        NOTHING,
        "  1  --seed=1  python3 -m hpcprof_kit.apps.seqpar --seed 1",
    ]
    assert "#SBATCH --array=1\n" in out and "    1) run_dir='<sweep>/<run of variant 1>'" in out
    assert sorted(p.name for p in sweep.path.iterdir()) == before  # nothing added


def test_render_vary_with_output_is_refused(tmp_path, capsys):
    out = tmp_path / "x.sh"
    assert main(["render", "--system", "local", "--vary", "nodes=1", "-o", str(out)]) == 2
    assert "render --vary prints a sweep's preview" in capsys.readouterr().err
    assert not out.exists()


# A small PBS cluster that is neither Aurora nor Polaris: no account, no filesystems resource.
GENERIC_PBS = """\
name = "mypbs"
title = "A small OpenPBS cluster"
scheduler = "pbs"
launcher = "hydra"
account_required = false
default_queue = "workq"
pbs_place = "scatter"
pbs_select_suffix = ""
pbs_keep = "doe"
[topology]
sockets = 0
cores_per_socket = 0
threads_per_core = 0
sibling_offset = 0
gpus = 0
[queues.workq]
min_nodes = 1
max_nodes = 4
max_walltime = "01:00:00"
[environment]
setup = []
[environment.vars]
"""


def test_dry_run_on_a_generic_pbs_record(isolated_runs, tmp_path, monkeypatch, capsys):
    (tmp_path / "systems").mkdir()
    (tmp_path / "systems" / "mypbs.toml").write_text(GENERIC_PBS)
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(tmp_path / "systems"))
    words = ["sweep", "--system", "mypbs", "--example", "seqpar", "--ranks-per-node", "1",
             "--vary", "nodes=1,2", "--dry-run"]  # fmt: skip
    assert main(words) == 0
    assert (
        capsys.readouterr().out
        == f"""\
sweep of seqpar on mypbs: 2 variants, one PBS job array (qsub)
{NOTHING}
  0  nodes=1  python3 -m hpcprof_kit.apps.seqpar
  1  nodes=2  python3 -m hpcprof_kit.apps.seqpar
{SUBMITTED}
#!/bin/bash -l
#PBS -N sweep-seqpar
#PBS -q workq
#PBS -l select=2
#PBS -l place=scatter
#PBS -l walltime=00:10:00
#PBS -k doe
#PBS -J 0-1
{SWEEP_LINE}
set -o pipefail
case "${{PBS_ARRAY_INDEX:?this script runs as a job array}}" in
    0) run_dir='<sweep>/<run of variant 0>' ;;  # nodes=1
    1) run_dir='<sweep>/<run of variant 1>' ;;  # nodes=2
    *) echo "array index $PBS_ARRAY_INDEX: no variant to run (it completed before)"; exit 0 ;;
esac
export HPCPROF_RUN_DIR="$run_dir"
cd "$run_dir"
bash job.sh >stdout 2>stderr
"""
    )
    assert not isolated_runs.exists()
