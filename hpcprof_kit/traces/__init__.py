"""Traces: load Kineto / unitrace traces of many ranks into one table, analyse it, plot it.

>>> from hpcprof_kit import traces            # doctest: +SKIP
>>> df = traces.load("runs/demo_local_N1_R2_20260101-120000/traces")   # doctest: +SKIP
>>> traces.step_breakdown(df)                 # doctest: +SKIP

The analyses each read only the trace table and return a DataFrame:

- ``step_breakdown``: per rank and step, compute / hidden comm / exposed comm / memory / host /
  idle, compute first (adds up to wall); ``step_spans``: each step's span per rank
- ``top_ops``, ``top_kernels``: count, total, self, mean, max, share (``self_times``: the self
  time of every slice)
- ``user_ranges``: the same for your own ``record_function`` ranges
- ``same_name``: every slice with one name, its summary and distribution
- ``comm_overlap``: per rank, communication hidden behind compute and exposed
- ``rank_steps``: step time per rank x step, straggler and spread
- ``compare_runs``: two runs (eager vs compiled) per op and per step
- ``event_args``: the arguments rules need (copy bytes and kinds, collective sizes, input
  shapes, grid and block), read back from the trace files for the rows that carry them

Names are imported lazily so ``import hpcprof_kit.traces`` stays light; this list is the one
place they are named.

>>> "step_breakdown" in __all__ and "PARTS" in __all__
True
"""

from __future__ import annotations

import importlib

# public name -> module (inside this package) that defines it
_EXPORTS = {
    "load": "loader",
    "load_file": "loader",
    "COMM_PATTERNS": "patterns",
    "classify_comm": "patterns",
    "merge_to_chrome": "merge",
    "PARTS": "breakdown",
    "step_breakdown": "breakdown",
    "step_spans": "breakdown",
    "comm_overlap": "breakdown",
    "rank_steps": "breakdown",
    "top_ops": "ops",
    "top_kernels": "ops",
    "self_times": "ops",
    "user_ranges": "ops",
    "same_name": "ops",
    "compare_runs": "compare",
    "plot_timeline": "plots",
    "plot_breakdown": "plots",
    "plot_rank_heatmap": "plots",
    "plot_breakdown_spread": "spread",
    "pick_ranks": "rank_pick",
    "plot_same_name": "plots",
    "report": "run_report",
    "FINDING_KINDS": "findings",
    "memory_timeline": "memory",
    "memory_by_op": "memory",
    "memory_peaks": "memory",
    "plot_memory": "memory",
    "event_args": "event_args_table",
    "idle_split": "device_idle",
    "launch_stats": "device_idle",
    "launch_summary": "device_idle",
    "COLUMNS": "schema",
    "TRACKS": "schema",
    "empty_table": "schema",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hpcprof_kit.traces' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))


__all__ = sorted(_EXPORTS)
