"""Profiling: schedules explained and drawn, the profiler factory, capture ranges.

>>> from hpcprof_kit.profiling import schedule_steps
>>> [r["state"] for r in schedule_steps(wait=1, warmup=1, active=2, steps=4)]
['idle', 'warmup', 'record', 'record_and_save']

Everything here imports torch only when a profiler is actually built.
"""

from __future__ import annotations

from hpcprof_kit.profiling.args import add_profiler_args, profiler_from_args, schedule_from_args
from hpcprof_kit.profiling.factory import (
    NoProfiler,
    RankProfiler,
    compile_note,
    default_trace_dir,
    make_profiler,
    recorded_steps,
    trace_name,
)
from hpcprof_kit.profiling.schedule import (
    STATES,
    Schedule,
    format_schedule,
    plot_schedule,
    schedule_steps,
    schedule_table,
)
from hpcprof_kit.profiling.select import parse_activities, parse_ranks, rank_is_selected

__all__ = [
    "STATES", "NoProfiler", "RankProfiler", "Schedule",
    "add_profiler_args", "compile_note", "default_trace_dir", "format_schedule",
    "make_profiler", "parse_activities", "parse_ranks", "plot_schedule",
    "profiler_from_args", "rank_is_selected", "recorded_steps", "schedule_from_args", "schedule_steps",
    "schedule_table", "trace_name",
]  # fmt: skip
