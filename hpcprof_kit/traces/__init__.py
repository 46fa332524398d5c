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
    "load": "table.loader",
    "load_file": "table.loader",
    "COMM_PATTERNS": "read.patterns",
    "classify_comm": "read.patterns",
    "merge_to_chrome": "table.merge",
    "PARTS": "analyses.breakdown",
    "step_breakdown": "analyses.breakdown",
    "step_spans": "analyses.breakdown",
    "comm_overlap": "analyses.breakdown",
    "rank_steps": "analyses.breakdown",
    "top_ops": "analyses.ops",
    "top_kernels": "analyses.ops",
    "self_times": "analyses.ops",
    "user_ranges": "analyses.ops",
    "same_name": "analyses.ops",
    "compare_runs": "analyses.compare",
    "plot_timeline": "plots.timeline",
    "plot_breakdown": "plots.charts",
    "plot_rank_heatmap": "plots.charts",
    "plot_breakdown_spread": "plots.spread",
    "pick_ranks": "analyses.rank_pick",
    "plot_same_name": "plots.charts",
    "report": "reporting.report",
    "FINDING_KINDS": "findings",
    "memory_timeline": "analyses.memory",
    "memory_by_op": "analyses.memory",
    "memory_peaks": "analyses.memory",
    "plot_memory": "plots.memory",
    "event_args": "table.event_args",
    "idle_split": "analyses.device_idle",
    "launch_stats": "analyses.device_idle",
    "launch_summary": "analyses.device_idle",
    "COLUMNS": "table.schema",
    "TRACKS": "table.schema",
    "empty_table": "table.schema",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hpcprof_kit.traces' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))


__all__ = sorted(_EXPORTS)
