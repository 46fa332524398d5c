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


# Two real Nsight Compute exports, recorded on an H100 (see samples/README.md), by page.
NCU_SAMPLES = {
    "raw": "h100_seqpar_bf16_ncu_raw.csv.gz",
    "details": "h100_train_fp32_ncu_details.csv.gz",
}


def sample_ncu_export(page: str = "raw") -> str:
    """A real ``ncu --csv --page raw|details`` export, recorded on an H100 (``samples/README.md``):
    ncu's numbers and advice on a machine without a GPU.

    >>> raw = read_ncu_raw(sample_ncu_export("raw"))
    >>> raw["name"].str[:10].tolist()
    ['nvjet_sm90', 'nvjet_sm90', 'nvjet_sm90', 'nvjet_sm90']
    """
    import gzip

    from hpcprof_kit.errors import SpecError

    if page not in NCU_SAMPLES:
        raise SpecError(
            f"page {page!r} has no sample export; use one of {sorted(NCU_SAMPLES)} "
            "(ncu --csv --page raw|details)"
        )
    with gzip.open(SAMPLES / NCU_SAMPLES[page], "rt", encoding="utf-8") as fh:
        return fh.read()


__all__ = [
    "COLUMNS",
    "NCU_SAMPLES",
    "SAMPLES",
    "sample_kernel_summary",
    "sample_ncu_export",
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
