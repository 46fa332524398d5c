"""The trace analyses in one place; each reads only the trace table and returns a DataFrame.

- ``step_breakdown``: per rank and step, compute / hidden comm / exposed comm / memory / host /
  idle, compute first (adds up to wall)
- ``top_ops``, ``top_kernels``: count, total, self, mean, max, share
- ``user_ranges``: the same for your own ``record_function`` ranges
- ``same_name``: every slice with one name, its summary and distribution
- ``comm_overlap``: per rank, communication hidden behind compute and exposed
- ``rank_steps``: step time per rank x step, straggler and spread
- ``compare_runs``: two runs (eager vs compiled) per op and per step

>>> from hpcprof_kit.traces import analyses
>>> "step_breakdown" in analyses.__all__
True
"""

from __future__ import annotations

from hpcprof_kit.traces.breakdown import PARTS, comm_overlap, rank_steps, step_breakdown, step_spans
from hpcprof_kit.traces.compare import compare_runs
from hpcprof_kit.traces.ops import same_name, self_times, top_kernels, top_ops, user_ranges

__all__ = [
    "PARTS",
    "comm_overlap",
    "compare_runs",
    "rank_steps",
    "same_name",
    "self_times",
    "step_breakdown",
    "step_spans",
    "top_kernels",
    "top_ops",
    "user_ranges",
]
