"""Schedules explained: the table agrees with torch's own schedule; bad input gets ScheduleError."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcprof_kit.errors import ScheduleError
from hpcprof_kit.profiling import format_schedule, schedule_steps, schedule_table
from hpcprof_kit.profiling.schedule import TORCH_ACTION_OF


def torch_states(wait, warmup, active, repeat, skip_first, steps):
    import torch.profiler

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns when warmup == 0
        fn = torch.profiler.schedule(
            wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first
        )
    return [fn(step).name for step in range(steps)]


@settings(max_examples=300, deadline=None)
@given(
    wait=st.integers(0, 6),
    warmup=st.integers(0, 6),
    active=st.integers(1, 6),
    repeat=st.integers(0, 4),
    skip_first=st.integers(0, 8),
    steps=st.integers(1, 60),
)
def test_schedule_table_equals_torch_schedule(wait, warmup, active, repeat, skip_first, steps):
    expected = torch_states(wait, warmup, active, repeat, skip_first, steps)
    if not any(a in ("RECORD", "RECORD_AND_SAVE") for a in expected):
        with pytest.raises(ScheduleError, match="records nothing"):
            schedule_steps(wait, warmup, active, repeat, skip_first, steps)
        return
    rows = schedule_steps(wait, warmup, active, repeat, skip_first, steps)
    assert [TORCH_ACTION_OF[r["state"]] for r in rows] == expected
    # Trace k holds the recorded steps between the k-th and (k+1)-th save.
    saves = 0
    for row, action in zip(rows, expected, strict=True):
        recorded = action in ("RECORD", "RECORD_AND_SAVE")
        assert row["trace"] == (saves if recorded else None)
        assert row["profiler_step"] == (f"ProfilerStep#{row['step']}" if recorded else "")
        saves += action == "RECORD_AND_SAVE"


def test_worked_example_from_the_reference():
    table = schedule_table(wait=1, warmup=1, active=2, repeat=1, steps=6)
    assert table["state"].tolist() == [
        "idle",
        "warmup",
        "record",
        "record_and_save",
        "idle",
        "idle",
    ]
    assert table.loc[table["trace"] == 0, "profiler_step"].tolist() == [
        "ProfilerStep#2",
        "ProfilerStep#3",
    ]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"active": 0}, ["active=0", "active >= 1"]),
        ({"wait": -1}, ["wait=-1", "wait >= 0"]),
        ({"repeat": -2}, ["repeat=-2", "repeat >= 0"]),
        ({"skip_first": -1}, ["skip_first=-1", "skip_first >= 0"]),
        (
            {"skip_first": 10, "steps": 8},
            ["records nothing within steps=8", "first recorded step is 12", "steps=14"],
        ),
        ({"steps": 0}, ["steps=0", ">= 1"]),
    ],
)
def test_bad_schedule_names_field_value_and_fix(kwargs, words):
    with pytest.raises(ScheduleError) as err:
        schedule_steps(**kwargs)
    for word in words:
        assert word in str(err.value)


def test_text_table_for_the_worked_example():
    assert format_schedule(schedule_steps(1, 1, 2, 1, 0, 5)) == "\n".join(
        [
            "step  state            trace  profiler_step",
            "   0  idle                 -",
            "   1  warmup               -",
            "   2  record               0  ProfilerStep#2",
            "   3  record_and_save      0  ProfilerStep#3",
            "   4  idle                 -",
        ]
    )


def test_cli_schedule_json_and_error():
    cmd = [sys.executable, "-m", "hpcprof_kit", "schedule", "--wait", "1", "--warmup", "1",
           "--active", "2", "--repeat", "1", "--skip-first", "1", "--steps", "6", "--json"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [
        {"step": 0, "state": "idle"},
        {"step": 1, "state": "idle"},
        {"step": 2, "state": "warmup"},
        {"step": 3, "state": "record"},
        {"step": 4, "state": "record_and_save"},
        {"step": 5, "state": "idle"},
    ]
    bad = subprocess.run(cmd[:-3] + ["--active", "0"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "active=0" in bad.stderr and "active >= 1" in bad.stderr


def test_plot_schedule_draws_one_bar_per_step():
    import matplotlib

    matplotlib.use("Agg")
    from hpcprof_kit.profiling import plot_schedule

    fig, table = plot_schedule(wait=1, warmup=1, active=2, repeat=2, steps=9)
    bars = fig.axes[0].patches
    assert len(bars) == 9
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert labels == ["T0", "T0", "T1", "T1"]
    assert table["trace"].tolist()[2:4] == [0, 0]
