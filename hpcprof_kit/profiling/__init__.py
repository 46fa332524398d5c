"""Profiling: schedules explained and drawn, the profiler factory, named ranges in your code.

As the guides teach it: ``make_profiler`` records shapes and memory and writes, per rank, the
trace and ``key_averages().table(sort_by=table_sort_key(...), row_limit=-1)``;
``record_function("name")`` (ATPESC guide) and ``@trace_func`` (ALCF Polaris guide) name your own
code in the trace.

What a training script needs, in one import:

>>> from hpcprof_kit.profiling import capture, make_profiler, record_function, trace_func
>>> from hpcprof_kit.profiling import schedule_steps
>>> [r["state"] for r in schedule_steps(wait=1, warmup=1, active=2, steps=4)]
['idle', 'warmup', 'record', 'record_and_save']

A job's progress bar is fed by ``hpcprof_kit.jobs.progress.report_progress`` (the jobs read it).
Everything here imports torch only when a profiler is actually built.
"""

from __future__ import annotations

from hpcprof_kit.profiling.args import add_profiler_args, profiler_from_args, schedule_from_args
from hpcprof_kit.profiling.factory import (
    SORT_KEYS,
    NoProfiler,
    RankProfiler,
    default_tables_dir,
    default_trace_dir,
    make_profiler,
    table_sort_key,
    trace_name,
)
from hpcprof_kit.profiling.ranges import capture, compile_note, record_function, trace_func
from hpcprof_kit.profiling.schedule import (
    STATES,
    Schedule,
    format_schedule,
    plot_schedule,
    recorded_steps,
    schedule_steps,
    schedule_table,
)
from hpcprof_kit.profiling.select import parse_activities, parse_ranks, rank_is_selected

__all__ = [
    "SORT_KEYS", "STATES", "NoProfiler", "RankProfiler", "Schedule",
    "add_profiler_args", "capture", "compile_note", "default_tables_dir", "default_trace_dir",
    "format_schedule", "make_profiler", "parse_activities", "parse_ranks", "plot_schedule",
    "profiler_from_args", "rank_is_selected", "record_function", "recorded_steps",
    "schedule_from_args", "schedule_steps", "schedule_table", "table_sort_key",
    "trace_func", "trace_name",
]  # fmt: skip
