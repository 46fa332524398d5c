"""The pathologies app under real Hydra mpiexec (2 ranks, gloo, CPU), profiled with the
kit's profiler flags: the run report names the host-side problems it really made, with the
slowed rank and steps, and lists the device-only kinds as not applicable on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

from hpcprof_kit.apps.pathologies import PROBLEMS, build_parser, problems
from hpcprof_kit.errors import SpecError
from hpcprof_kit.timing import load_timings
from hpcprof_kit.traces.run_report import report

PROFILE = ["--profile", "--prof-wait", "0", "--prof-warmup", "1", "--prof-active", "7",
           "--prof-repeat", "1"]  # fmt: skip


def _run(mpiexec, run_dir, *flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["HPCPROF_RUN_DIR"] = str(run_dir)
    run_dir.mkdir(parents=True)
    cmd = [mpiexec, "-n", "2", sys.executable, "-m", "hpcprof_kit.apps.pathologies", *flags,
           *PROFILE]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.mpi
def test_the_report_names_the_slow_dataloader_and_the_intermittent_straggler(mpiexec, tmp_path):
    done = _run(mpiexec, tmp_path / "run", "--problem", "data_loading,straggler",
                "--slow-ms", "150", "--loader-ms", "30")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "pathologies: 8 steps with data_loading, straggler" in done.stdout
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = report(tmp_path / "run" / "traces")
    found = {f["kind"]: f for f in rep.findings}
    assert found["data_loading"]["ranks"] == [0, 1]
    assert "waits" in found["data_loading"]["summary"] and "DataLoader" in found["data_loading"][
        "summary"]  # fmt: skip
    assert (found["straggler"]["ranks"], found["straggler"]["steps"]) == ([1], [3, 5])
    for kind in ("synchronize_in_step", "launch_bound", "allocator_churn"):
        assert rep.findings.coverage[kind].startswith("not applicable: the trace has no device")


@pytest.mark.mpi
def test_a_run_without_problems_gets_neither_and_writes_its_step_times(mpiexec, tmp_path):
    done = _run(mpiexec, tmp_path / "run", "--problem", "none")
    assert done.returncode == 0, done.stderr
    assert "pathologies: 8 steps with none" in done.stdout
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kinds = {f["kind"] for f in report(tmp_path / "run" / "traces").findings}
    assert not kinds & {"data_loading", "straggler"}
    # every rank's step times for a sweep's comparison: 8 steps less the warm-up step
    t = load_timings(tmp_path / "run")
    assert sorted(t["rank"].unique()) == [0, 1]
    steps = t[t["op"] == "step"].groupby("rank")["seconds"]
    assert steps.count().tolist() == [7, 7]
    assert (steps.min() >= 0.020).all()  # each step computes --work-ms 20 at least
    assert set(t["app"]) == {"pathologies"}


def test_an_unknown_problem_is_refused_with_the_list():
    with pytest.raises(SpecError, match="slow_disk is not a problem this app makes; pick from"):
        problems("data_loading,slow_disk")
    assert build_parser().parse_args(["--problem", ",".join(PROBLEMS)]).problem.count(",") == 4
