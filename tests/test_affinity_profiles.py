"""The binding experiment profiles each plan (the ATPESC guide: "Profile the application with various
bindings on multiple ranks") and compares the plans' traces: step time and top ops."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from hpcprof_kit.affinity.experiment import Experiment, profile_args, run_experiment
from hpcprof_kit.affinity.presets import plan_for
from hpcprof_kit.affinity.profiles import compare_profiles, plan_ops, plan_steps
from hpcprof_kit.apps._common import write_timings
from hpcprof_kit.errors import BindingError
from hpcprof_kit.profiling import make_profiler


def _plan_run(run_dir, work) -> None:
    """Two ranks' real CPU traces (3 steps, the last 2 recorded) in ``run_dir/traces``."""
    for rank in (0, 1):
        prof = make_profiler({"wait": 0, "warmup": 1, "active": 2}, activities="cpu", rank=rank,
                             world_size=2, trace_dir=run_dir / "traces")  # fmt: skip
        with prof:
            for _ in range(3):
                work()
                prof.step()


def _step_ms(run_dir) -> dict[int, list[float]]:
    """Each rank's ProfilerStep durations (ms), read straight from the JSON."""
    out = {}
    for rank in (0, 1):
        events = json.loads((run_dir / "traces" / f"trace-{rank}-of-2.json").read_text())
        out[rank] = sorted(e["dur"] / 1e3 for e in events["traceEvents"]
                           if str(e.get("name", "")).startswith("ProfilerStep#"))  # fmt: skip
    return out


@pytest.fixture(scope="module")
def two_plans(tmp_path_factory):
    import torch

    root = tmp_path_factory.mktemp("plans")
    _plan_run(root / "core", lambda: torch.rand(96, 96) @ torch.rand(96, 96))
    _plan_run(root / "none", lambda: torch.sort(torch.rand(50_000)))
    return {"core": root / "core", "none": root / "none"}


def test_plan_steps_are_the_profiler_steps_of_each_rank(two_plans):
    steps = plan_steps(two_plans)
    assert steps[["plan", "rank", "steps"]].values.tolist() == [
        ["core", 0, 2], ["core", 1, 2], ["none", 0, 2], ["none", 1, 2]]  # fmt: skip
    for plan, run_dir in two_plans.items():
        for rank, durations in _step_ms(run_dir).items():
            row = steps[(steps["plan"] == plan) & (steps["rank"] == rank)].iloc[0]
            assert row["max_step_ms"] == pytest.approx(max(durations), rel=1e-3)
            assert row["median_step_ms"] == pytest.approx(sum(durations) / 2, rel=1e-3)


def test_top_ops_differ_by_plan_and_the_comparison_has_both(two_plans):
    ops = plan_ops(two_plans, n=3)
    top = {plan: set(group["name"]) for plan, group in ops.groupby("plan")}
    assert "aten::mm" in top["core"] and "aten::mm" not in top["none"]
    assert "aten::sort" in top["none"] and "aten::sort" not in top["core"]
    table = compare_profiles(two_plans, n=3)
    assert table.index.tolist() == ["core", "none"]
    assert table[["ranks", "steps"]].values.tolist() == [[2, 2], [2, 2]]
    assert {"median_step_ms", "max_step_ms", "slowest_rank", "aten::mm", "aten::sort"} <= set(
        table.columns
    )
    assert table.loc["none", "aten::mm"] == 0 and table.loc["core", "aten::sort"] == 0
    assert table.loc["core", "aten::mm"] > 0 and table.loc["none", "aten::sort"] > 0


def test_a_plan_without_traces_is_named(tmp_path, two_plans):
    with pytest.raises(BindingError, match="plan 'bare' has no traces to compare.*profile=True"):
        compare_profiles({**two_plans, "bare": tmp_path})


def test_the_profiled_steps_are_the_last_ones_and_stay_out_of_the_median(tmp_path, two_plans):
    flags, first = profile_args(8)
    assert flags[:3] == ["--profile", "--prof-skip-first", "4"] and first == 5
    with pytest.raises(BindingError, match="at least 4 steps"):
        profile_args(3)
    # A job of 8 steps: timings for steps 1..7; steps 5..7 ran under the profiler.
    run_dir = two_plans["core"]
    timing_dir = tmp_path / "timings"
    for rank in (0, 1):
        steps = [0.010, 0.012, 0.011, 0.013, 0.500, 0.600, 0.700]  # profiled ones are slow
        write_timings(timing_dir, {"app": "train", "rank": rank, "world_size": 2, "dtype": "float32",
                                   "timings": {"step": steps}})  # fmt: skip
    os.symlink(timing_dir, run_dir / "timings")
    try:
        exp = Experiment({"core": plan_for("local", 2, "core")},
                         {"core": SimpleNamespace(run_dir=run_dir)}, profiled_from=first)  # fmt: skip
        assert exp.step_times("core").round(3).tolist() == [11.5, 11.5]
        assert exp.profiles(n=2).index.tolist() == ["core"]
    finally:
        (run_dir / "timings").unlink()


@pytest.mark.mpi
def test_the_experiment_profiles_every_plan(isolated_runs):
    exp = run_experiment("local", 2, ["core", "none"], epochs=1, steps_per_epoch=4)
    for name in ("core", "none"):
        traces = sorted(p.name for p in (exp.jobs[name].run_dir / "traces").glob("*.json"))
        assert traces == ["trace-0-of-2.json", "trace-1-of-2.json"]
    table = exp.profiles(n=3)
    assert table.index.tolist() == ["core", "none"] and (table["steps"] == 2).all()
    assert set(exp.side_by_side()["plan"]) == {"core", "none"}
    unprofiled = run_experiment("local", 2, ["core"], epochs=1, steps_per_epoch=2, profile=False)
    assert list((unprofiled.jobs["core"].run_dir / "traces").glob("*.json")) == []
    with pytest.raises(BindingError, match="without profile=True"):
        unprofiled.profiles()


@pytest.mark.mpi
def test_a_failed_plan_is_named_the_others_complete_and_rerun_runs_only_it(
    isolated_runs, monkeypatch, capsys
):
    """One plan's job really fails (the train app refuses a flag given to that plan alone); the
    experiment goes on, names it with the fix, and exp.rerun() runs only it in a new folder."""
    import hpcprof_kit.jobs.submission as submission

    real_submit, broken = submission.submit, {"none"}

    def submit_breaking_none(spec, **how):
        if spec.binding in broken:
            spec = spec.with_(args=(*spec.args, "--no-such-flag"))
        return real_submit(spec, **how)

    monkeypatch.setattr(submission, "submit", submit_breaking_none)  # the sweep submits each plan
    exp = run_experiment("local", 2, ["core", "none"], steps_per_epoch=3, profile=False)
    assert list(exp.failed) == ["none"]
    assert "the job of plan 'none' ended FAILED (exit 2)" in exp.failed["none"]
    assert "exp.rerun() runs only the failed plan(s) again" in capsys.readouterr().out
    assert len(exp.step_times("core")) == 2  # the plan that ran is there to read
    with pytest.raises(BindingError, match=r"plan 'none' ended FAILED[\s\S]*exp\.rerun\(\)"):
        exp.side_by_side()
    first = exp.jobs["none"].run_dir

    broken.clear()
    assert exp.rerun() == ["none"]
    assert exp.failed == {}
    assert exp.jobs["none"].run_dir != first and (first / "stderr").is_file()  # both kept
    assert set(exp.side_by_side()["plan"]) == {"core", "none"}


@pytest.mark.mpi
def test_an_experiment_whose_every_plan_failed_is_an_error(isolated_runs):
    with pytest.raises(BindingError, match="the job of plan 'core' ended FAILED"):
        run_experiment("local", 2, ["core"], steps_per_epoch=3, profile=False,
                       venv="/no/such/venv")  # fmt: skip
