"""Traces: load Kineto / unitrace traces of many ranks into one table, analyse it, plot it.

>>> from hpcprof_kit import traces            # doctest: +SKIP
>>> df = traces.load("runs/demo_local_N1_R2_20260101-120000/traces")   # doctest: +SKIP
>>> traces.step_breakdown(df)                 # doctest: +SKIP

Names are imported lazily so ``import hpcprof_kit.traces`` stays light.
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
    "step_breakdown": "analyses",
    "top_ops": "analyses",
    "top_kernels": "analyses",
    "user_ranges": "analyses",
    "same_name": "analyses",
    "comm_overlap": "analyses",
    "rank_steps": "analyses",
    "compare_runs": "analyses",
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
