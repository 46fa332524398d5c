"""A sweep on a real Slurm (tests/slurm_cluster.py): a 2x2 grid submitted as one job array,
whose index picks each variant's own run directory, and one comparison of the four; array
tasks cancelled while pending never started (issue #36)."""

from __future__ import annotations

import csv
import json

import pytest

from hpcprof_kit.cli import main as cli_main
from hpcprof_kit.jobs import Job, JobSpec, RunDir
from hpcprof_kit.jobs.sweep import Sweep
from hpcprof_kit.timing import load_timings, timing_summary

from slurm_cluster import _until  # the tests' one poll of an answer until it is reached

pytestmark = pytest.mark.slurm

SMALL = ("--steps", "3", "--warmup", "0", "--seq-len", "64", "--hidden", "32")


def test_two_by_two_sweep_is_one_array_job_with_four_runs_and_one_table(cluster_env):
    base = JobSpec(system="slurm", example="seqpar", binding="none", args=SMALL)
    sweep = base.sweep(ranks_per_node=[1, 2], **{"--dtype": ["float32", "bfloat16"]})
    sweep.run(backend="auto", wait=True)

    assert [p.name for p in sweep.path.glob("array*.sh")] == ["array.sh"]
    script = (sweep.path / "array.sh").read_text()
    assert "#SBATCH --array=0-3\n" in script and "#SBATCH --ntasks-per-node=2\n" in script
    entries = json.loads((sweep.path / "sweep.json").read_text())["variants"]
    array_ids = set()
    for entry in entries:
        run = RunDir(sweep.path / entry["run_dir"])
        manifest = run.manifest()
        array_ids.add(manifest["array_job_id"])
        assert manifest["backend"] == "slurm" and manifest["state"] == "COMPLETED"
        assert manifest["job_id"] == f"{manifest['array_job_id']}_{entry['index']}"
        assert run.script.read_text() == run.spec().render()  # as submit() writes it
        # Each index ran its own variant in its own run directory.
        timing = json.loads(next((run.path / "timings").glob("seqpar-0-of-*.json")).read_text())
        assert (timing["world_size"], timing["dtype"]) == (
            entry["values"]["ranks_per_node"],
            entry["values"]["--dtype"],
        )
    assert len(array_ids) == 1 and len({e["run_dir"] for e in entries}) == 4
    assert [e["state"] for e in entries] == ["COMPLETED"] * 4

    sweep.compare()
    with open(sweep.path / "comparison.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4
    for row, entry in zip(rows, entries, strict=True):
        own = timing_summary(load_timings(sweep.path / entry["run_dir"]))
        median = own.loc[own["op"] == "step", "median_ms"].iloc[0]
        assert float(row["step_median_ms"]) == pytest.approx(median, rel=1e-12)
        assert row["state"] == "COMPLETED" and row["breakdown_from"] == "timings"

    # Nothing left to run: a second run() submits no second array.
    Sweep.load(sweep.path).run(backend="auto", wait=True)
    assert [p.name for p in sweep.path.glob("array*.sh")] == ["array.sh"]


def test_failed_array_element_is_marked_and_a_rerun_submits_only_its_index(cluster_env):
    base = JobSpec(system="slurm", example="seqpar", ranks_per_node=1, binding="none", args=SMALL)
    # float16 is not one of seqpar's --dtype choices: index 1 fails in the app itself.
    sweep = base.sweep(**{"--dtype": ["float32", "float16"]})
    sweep.run(backend="auto", wait=True)
    first = json.loads((sweep.path / "sweep.json").read_text())["variants"]
    assert [e["state"] for e in first] == ["COMPLETED", "FAILED"]
    assert "invalid choice: 'float16'" in (sweep.path / first[1]["run_dir"] / "stderr").read_text()

    Sweep.load(sweep.path).run(backend="auto", wait=True)
    assert "#SBATCH --array=1\n" in (sweep.path / "array-1.sh").read_text()
    again = json.loads((sweep.path / "sweep.json").read_text())["variants"]
    assert again[0]["run_dir"] == first[0]["run_dir"] and again[0]["job_id"] == first[0]["job_id"]
    assert again[1]["earlier_runs"] == [first[1]["run_dir"]]
    assert again[1]["job_id"].endswith("_1") and again[1]["job_id"] != first[1]["job_id"]


# Each variant runs `bash -c SCRIPT v --code WORD`: `wait` ends 0 once the test's gate exists.
GATED = 'if [ "$2" = wait ]; then until [ -e {gate} ]; do sleep 0.1; done; fi; exit 0'


def test_array_tasks_cancelled_while_pending_never_started_and_resume_runs_them(
    cluster_env, tmp_path, capsys
):
    """One task at a time (%1): 0 runs, 1 and 2 pend. The user scancels task 2, then the whole
    array: 0 is CANCELLED (its trap's record), 1 and 2 never started; --resume runs all three."""
    gate = tmp_path / "gate"
    base = JobSpec(system="slurm", ranks_per_node=1, binding="none", walltime="00:05:00",
                   command=("bash", "-c", GATED.format(gate=gate), "v"))  # fmt: skip
    sweep = base.sweep(**{"--code": ["wait", "0", "0"]})
    sweep.run(backend="slurm", wait=False, max_concurrent=1)
    assert "#SBATCH --array=0-2%1\n" in (sweep.path / "array.sh").read_text()
    runs = [sweep.path / e["run_dir"] for e in sweep.record()["variants"]]
    began, _ = _until(lambda: (runs[0] / "stdout").exists(), bool, 120, interval=0.1)
    assert began, "array task 0 never started"
    array = RunDir(runs[0]).manifest()["array_job_id"]
    cluster_env.run("scancel", f"{array}_2")  # a pending task, by the user: Slurm forgets it
    assert Job.from_run_dir(runs[2]).refresh() == "NOT_STARTED"
    assert RunDir(runs[2]).manifest()["note"] == (
        f"Slurm no longer knows job {array}_2 (an array task cancelled while pending is "
        "forgotten at once), and it left no output: it never ran"
    )
    cluster_env.run("scancel", array)  # the whole array: task 0 running, task 1 pending
    assert sweep.wait(timeout=120) == {0: "CANCELLED", 1: "NOT_STARTED", 2: "NOT_STARTED"}
    assert not any((r / "stdout").exists() or (r / "job_end.json").exists() for r in runs[1:])
    assert [v.index for v in sweep.pending()] == [0, 1, 2]
    assert cli_main(["explain", str(runs[1])]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "  what to do: it never started: Slurm cancelled its array task while it was pending "
        "(scancel of the task or of the array): no output, no record; hpcprof-kit sweep --resume "
        f"{sweep.path} runs it again, with the sweep's other variants that did not complete"
    )

    gate.touch()
    again = Sweep.load(sweep.path).run(backend="slurm", wait=True)
    assert again.refresh() == {0: "COMPLETED", 1: "COMPLETED", 2: "COMPLETED"}
    assert [e["earlier_runs"] for e in again.record()["variants"]] == [[r.name] for r in runs]
