"""torch.profiler's own conventions accepted by the factory, the helpers where users look, and
a profiler that wrote nothing saying so."""

from __future__ import annotations

import warnings

import pytest

from hpcprof_kit.errors import KitWarning, SpecError
from hpcprof_kit.profiling import make_profiler, recorded_steps


def _run(prof, steps: int) -> None:
    import torch

    with prof:
        for _ in range(steps):
            torch.ones(16, 16).sum()
            prof.step()


def test_the_helpers_are_importable_where_users_look():
    from hpcprof_kit import profiling
    from hpcprof_kit.profiling import capture, record_function, trace_func

    assert callable(capture) and capture.__name__ == "capture"  # the function, not a module
    assert capture.__module__ == "hpcprof_kit.profiling.ranges"
    assert record_function.__name__ == "record_function" and trace_func.__name__ == "trace_func"
    assert {"capture", "record_function", "trace_func"} <= set(profiling.__all__)
    assert not hasattr(profiling, "report_progress")  # one home: hpcprof_kit.jobs.progress


def test_torch_schedule_and_profiler_activity_are_accepted(tmp_path):
    import torch.profiler as tp

    prof = make_profiler(
        schedule=tp.schedule(wait=1, warmup=1, active=1, repeat=1),
        activities=[tp.ProfilerActivity.CPU],
        trace_dir=tmp_path / "traces",
    )
    _run(prof, 5)
    assert [p.name for p in prof.traces] == ["trace-0-of-1.json"]
    assert recorded_steps(prof.traces[0]) == [2]
    assert prof.closed and prof.steps == 3  # closed right after its one cycle, as with Schedule


def test_a_schedule_callable_of_your_own_is_used_as_is(tmp_path):
    import torch.profiler as tp

    def mine(step: int):
        return {0: tp.ProfilerAction.WARMUP, 1: tp.ProfilerAction.RECORD_AND_SAVE}.get(
            step, tp.ProfilerAction.NONE
        )

    prof = make_profiler(schedule=mine, activities=tp.ProfilerActivity.CPU, trace_dir=tmp_path)
    _run(prof, 4)
    assert [recorded_steps(p) for p in prof.traces] == [[1]]


def test_on_trace_ready_is_called_after_the_kits_file_is_written(tmp_path):
    seen = []

    def handler(prof):
        seen.append((type(prof).__name__, sorted(p.name for p in tmp_path.glob("*.json"))))

    prof = make_profiler(schedule={"wait": 0, "warmup": 1, "active": 1, "repeat": 2},
                         activities="cpu", trace_dir=tmp_path, on_trace_ready=handler)  # fmt: skip
    _run(prof, 4)
    assert seen == [
        ("profile", ["trace-0-of-1.json"]),
        ("profile", ["trace-0-of-1.json", "trace_cycle1-0-of-1.json"]),
    ]


def test_a_profiler_that_wrote_no_trace_says_why(tmp_path):
    prof = make_profiler(schedule={"wait": 1, "warmup": 1, "active": 2}, activities="cpu",
                         trace_dir=tmp_path)  # fmt: skip
    with pytest.warns(KitWarning) as caught:
        _run(prof, 1)  # step 0 idles, step 1 warms up: nothing recorded yet
    assert [str(w.message) for w in caught] == [
        "rank 0 wrote no trace: the schedule first records step 2 (skip_first=0 + wait=1 + "
        "warmup=1), but prof.step() was called 1 time; call prof.step() once per iteration "
        "inside the with block and run more than 2 steps, or shorten the schedule"
    ]
    assert list(tmp_path.glob("*.json")) == []


def test_no_step_calls_at_all_are_counted(tmp_path):
    prof = make_profiler(schedule={"wait": 0, "warmup": 1, "active": 1}, activities="cpu",
                         trace_dir=tmp_path)  # fmt: skip
    with pytest.warns(KitWarning, match=r"first records step 1 .*was called 0 times;"):
        _run(prof, 0)


def test_a_callable_that_never_records_says_so(tmp_path):
    import torch.profiler as tp

    prof = make_profiler(schedule=lambda step: tp.ProfilerAction.NONE, activities="cpu",
                         trace_dir=tmp_path, rank=3, world_size=4)  # fmt: skip
    with pytest.warns(KitWarning) as caught:
        _run(prof, 1)
    assert str(caught[0].message) == (
        "rank 3 wrote no trace: your schedule records none of the first 10000 steps and "
        "prof.step() was called 1 time; check the schedule callable"
    )


def test_a_profiler_that_wrote_its_trace_stays_quiet(tmp_path):
    prof = make_profiler(schedule={"wait": 0, "warmup": 1, "active": 1}, activities="cpu",
                         trace_dir=tmp_path)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", KitWarning)
        _run(prof, 3)
    assert len(prof.traces) == 1


def test_tables_go_beside_a_traces_folder_else_inside_the_folder_given(tmp_path):
    for trace_dir, tables in ((tmp_path / "run" / "traces", tmp_path / "run" / "tables"),
                              (tmp_path / "mlp_traces", tmp_path / "mlp_traces" / "tables")):  # fmt: skip
        prof = make_profiler(schedule={"wait": 0, "warmup": 1, "active": 1}, activities="cpu",
                             trace_dir=trace_dir)  # fmt: skip
        _run(prof, 2)
        assert [p.name for p in tables.iterdir()] == ["trace-0-of-1.txt"]
    assert not (tmp_path / "tables").exists()


def test_activity_errors_speak_python_not_cli_flags():
    with pytest.raises(SpecError) as err:
        make_profiler(activities="cpu,tpu")
    assert str(err.value) == (
        "activities 'cpu,tpu': ['tpu'] not among cpu, cuda, xpu; pass 'auto', a comma list such "
        "as 'cpu,cuda', or ProfilerActivity values"
    )
    with pytest.raises(SpecError) as err:
        make_profiler(activities="cpu,cuda")  # this machine has no CUDA device
    assert str(err.value) == (
        "activities 'cpu,cuda': cuda cannot be recorded on this machine (available: cpu); pass "
        "activities='auto' (--activities auto on an app's command line) to record what this "
        "machine has"
    )
