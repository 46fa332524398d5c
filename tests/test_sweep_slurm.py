"""A sweep on a real Slurm (tests/slurm_cluster.py): a 2x2 grid submitted as one job array,
whose index picks each variant's own run directory, and one comparison of the four."""

from __future__ import annotations

import csv
import json

import pytest

from hpcprof_kit.jobs import JobSpec, RunDir
from hpcprof_kit.jobs.sweep import Sweep
from hpcprof_kit.timing import load_timings, timing_summary

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
