"""``sweep --resume DIR`` with job flags (``--walltime``, ``--queue``, ``--nodes``,
``--account``...): applied to the variants it runs again, kept in ``sweep.json``, shown by
``--dry-run``; a flag naming a field the grid varies is refused (issue 49: a timed-out
variant ran again with the walltime that had not been enough)."""

from __future__ import annotations

import json

from hpcprof_kit.cli import main
from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.jobs.rundir import RunDir
from hpcprof_kit.jobs.sweep import Sweep

NOTHING = "(a preview: nothing is run and nothing is written)"


def test_resume_dry_run_shows_the_new_walltime_and_writes_nothing(isolated_runs, capsys):
    sweep = JobSpec(system="slurm", example="seqpar", walltime="00:05:00").sweep(
        **{"--seed": ["0", "1"]}
    )
    sweep.create()
    sweep.mark(0, state="COMPLETED")
    sweep.mark(1, state="TIMEOUT")
    before = (sweep.path / "sweep.json").read_text()
    words = ["sweep", "--resume", str(sweep.path), "--walltime", "00:20:00", "--dry-run"]
    assert main(words) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:4] == [
        "sweep of seqpar on slurm: 1 variant, one Slurm job array (sbatch)",
        NOTHING,
        "job flags for the variants it runs again: --walltime 00:20:00 (kept in sweep.json "
        "when they run)",
        "  1  --seed=1  python3 -m hpcprof_kit.apps.seqpar --seed 1",
    ]
    assert "#SBATCH -t 00:20:00\n" in out and "00:05:00" not in out
    assert (sweep.path / "sweep.json").read_text() == before  # a preview writes nothing


def test_resume_runs_the_failed_variant_with_the_flags_and_keeps_them(isolated_runs, capsys):
    """A real local sweep: variant 1 fails, the resume gives it a walltime of 30 s."""
    # the variant reads its file after a moment: a rank that ends at once can leave Hydra's
    # mpiexec writing to its closed pipe (SIGPIPE, exit 141), seen once on a loaded machine
    base = JobSpec(system="local", ranks_per_node=1, binding="none", walltime="00:00:20",
                   command=("bash", "-c", 'sleep 0.3; test -e "$2" || exit 3',
                            "v"))  # fmt: skip
    marker = isolated_runs.parent / "fixed"
    sweep = base.sweep(**{"--x": [str(isolated_runs.parent), str(marker)]})
    sweep.run(backend="local")
    assert sweep.refresh() == {0: "COMPLETED", 1: "FAILED"}
    first = sweep.record()["variants"][1]["run_dir"]
    marker.touch()  # the cause is fixed; the variant runs again with a longer walltime
    assert main(["sweep", "--resume", str(sweep.path), "--walltime", "00:00:30"]) == 0
    data = json.loads((sweep.path / "sweep.json").read_text())
    entries = data["variants"]
    assert [e["state"] for e in entries] == ["COMPLETED", "COMPLETED"]
    assert entries[1]["earlier_runs"] == [first] and entries[1]["run_dir"] != first
    assert (data["job_flags"], entries[1]["job_flags"]) == ({"walltime": "00:00:30"},) * 2
    assert "job_flags" not in entries[0]  # it did not run again
    assert [r["job_flags"] for r in data["resumes"]] == [{"walltime": "00:00:30"}]
    assert data["resumes"][0]["variants"] == [1]
    assert data["base"]["walltime"] == "00:00:20"  # the sweep as it was made, kept
    rerun = RunDir(sweep.path / entries[1]["run_dir"])
    assert json.loads((rerun.path / "spec.json").read_text())["walltime"] == "00:00:30"
    assert rerun.manifest()["walltime_s"] == 30
    earlier = RunDir(sweep.path / first)
    assert json.loads((earlier.path / "spec.json").read_text())["walltime"] == "00:00:20"
    assert Sweep.load(sweep.path).base.walltime == "00:00:30"  # in force for a later resume


def test_a_flag_naming_a_varied_field_is_refused_before_anything_is_written(isolated_runs, capsys):
    sweep = JobSpec(system="slurm", example="seqpar").sweep(walltime=["00:05:00", "00:10:00"])
    sweep.create()
    sweep.mark(1, state="TIMEOUT")
    before = sorted(p.name for p in sweep.path.iterdir())
    text = (sweep.path / "sweep.json").read_text()
    assert main(["sweep", "--resume", str(sweep.path), "--walltime", "00:20:00"]) == 2
    assert capsys.readouterr().err == (
        "hpcprof-kit sweep: --walltime 00:20:00: walltime is a field this sweep varies "
        "(walltime=00:05:00,00:10:00), so each variant keeps its own value on --resume; leave "
        "--walltime out, or start a new sweep with --vary walltime=... (the values you want)\n"
    )
    assert sorted(p.name for p in sweep.path.iterdir()) == before
    assert (sweep.path / "sweep.json").read_text() == text


def test_resume_refuses_what_makes_another_sweep_and_a_flag_over_the_limit(isolated_runs, capsys):
    sweep = JobSpec(system="aurora", account="P", queue="debug").sweep(**{"--seed": ["0"]})
    sweep.create()
    assert main(["sweep", "--resume", str(sweep.path), "--system", "polaris"]) == 2
    assert capsys.readouterr().err == (
        "hpcprof-kit sweep: --system polaris: a resume runs the sweep's own system (its "
        "sweep.json); leave --system out, or start a new sweep with --system polaris\n"
    )
    assert main(["sweep", "--resume", str(sweep.path), "--walltime", "02:00:00"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "hpcprof-kit sweep: variant 0 (--seed=0) with the flags given: walltime 02:00:00 "
        "exceeds queue debug's 01:00:00 on aurora"
    )
