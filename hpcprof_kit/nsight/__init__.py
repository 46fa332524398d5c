"""Nsight Systems and Nsight Compute results as the kit's tables and pictures.

``nsys stats`` summaries (:mod:`.stats`), ``ncu --csv`` exports (:mod:`.ncu`), their plots
(:mod:`.plots`: ``plot_top_kernels``, ``plot_roofline``) and the step from one to the other:
an ncu job for a kernel the nsys summary names (:mod:`.plan`, ``hpcprof-kit ncu-plan``).

>>> from hpcprof_kit.nsight import REPORTS
>>> sorted(REPORTS)
['cuda_api', 'kernels', 'memory_time', 'nvtx', 'os_runtime']
"""

from __future__ import annotations

from pathlib import Path

from hpcprof_kit.nsight.ncu import read_ncu_details, read_ncu_raw, read_ncu_rules, roofline_table
from hpcprof_kit.nsight.plan import NcuPlan, choose_set, ncu_plan
from hpcprof_kit.nsight.stats import (
    COLUMNS,
    REPORTS,
    by_name,
    nsys_stats,
    rank_reports,
    read_stats,
    report_for,
    run_stats,
)

SAMPLES = Path(__file__).with_name("samples")


def sample_kernel_summary():
    """A kernel summary in ``nsys stats``'s documented layout (made-up numbers, see
    ``samples/README.md``): the nsys -> ncu step on a machine without a GPU.

    >>> sample_kernel_summary()["calls"].tolist()
    [300, 100, 400]
    """
    text = (SAMPLES / "cuda_gpu_kern_sum_documented_layout.csv").read_text()
    return read_stats(text, "kernels", where="the sample kernel summary")


__all__ = [
    "COLUMNS",
    "SAMPLES",
    "sample_kernel_summary",
    "REPORTS",
    "NcuPlan",
    "by_name",
    "choose_set",
    "ncu_plan",
    "nsys_stats",
    "rank_reports",
    "read_ncu_details",
    "read_ncu_raw",
    "read_ncu_rules",
    "read_stats",
    "report_for",
    "roofline_table",
    "run_stats",
]
