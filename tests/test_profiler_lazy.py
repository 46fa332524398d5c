"""The factory opens torch's profiler only around what it records, and numbering stays global."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcprof_kit.profiling import make_profiler, schedule_steps


def _steps_in(path) -> list[int]:
    events = json.loads(path.read_text())["traceEvents"]
    names = {e.get("name", "") for e in events if e.get("ph") == "X"}
    return sorted(int(n.split("#")[1]) for n in names if n.startswith("ProfilerStep#"))


def _loop(prof, steps: int) -> None:
    import torch

    a = torch.ones(8, 8)
    for _ in range(steps):
        (a @ a).sum()
        prof.step()


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    wait=st.integers(0, 3), warmup=st.integers(0, 2), active=st.integers(1, 3),
    repeat=st.integers(1, 2), skip_first=st.integers(0, 3),
)  # fmt: skip
def test_lazily_opened_profiler_records_the_schedules_steps(
    tmp_path_factory, wait, warmup, active, repeat, skip_first
):
    sched = {"wait": wait, "warmup": warmup, "active": active, "repeat": repeat,
             "skip_first": skip_first}  # fmt: skip
    steps = skip_first + repeat * (wait + warmup + active) + 2
    expected: dict[int, list[int]] = {}
    for row in schedule_steps(steps=steps, **sched):
        if row["trace"] is not None:
            expected.setdefault(row["trace"], []).append(row["step"])
    tdir = tmp_path_factory.mktemp("traces")
    prof = make_profiler(sched, trace_dir=tdir)
    with prof:
        _loop(prof, steps)
        assert prof.closed, "torch's profiler must be closed once the last cycle is saved"
    assert [_steps_in(p) for p in prof.traces] == [expected[k] for k in sorted(expected)]


def test_idle_steps_before_and_after_the_recording_cost_next_to_nothing(tmp_path):
    """Not a timing target (that is benchmarks/bench_profiler_overhead.py): the profiler is
    simply not open during wait steps and after the last cycle."""
    prof = make_profiler({"wait": 5, "warmup": 1, "active": 1, "repeat": 1}, trace_dir=tmp_path)
    with prof:
        _loop(prof, 4)  # steps 0-3 of the 5 wait steps
        assert not prof.opened
        _loop(prof, 1)  # now at step 5, the warmup step: open from here
        assert prof.opened and not prof.closed
        _loop(prof, 2)  # step 6 recorded and saved
        assert prof.closed
        _loop(prof, 5)
    assert [_steps_in(p) for p in prof.traces] == [[6]]


@pytest.mark.parametrize("repeat", [0])
def test_endless_schedule_stays_open_and_keeps_saving(tmp_path, repeat):
    prof = make_profiler(
        {"wait": 1, "warmup": 0, "active": 1, "repeat": repeat}, trace_dir=tmp_path
    )
    with prof:
        _loop(prof, 6)
        assert prof.opened and not prof.closed
    assert [_steps_in(p) for p in prof.traces] == [[1], [3], [5]]
