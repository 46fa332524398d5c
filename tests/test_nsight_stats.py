"""nsys stats CSV in both naming generations (documented layouts of the GPU-only reports):
the same kit table from either, unknown layouts refused, units and merged launch shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcprof_kit.errors import SpecError, TraceFormatError
from hpcprof_kit.nsight import COLUMNS, read_stats, report_for
from hpcprof_kit.nsight.plots import plot_top_kernels, top_rows
from hpcprof_kit.nsight.stats import by_name

FIXTURES = Path(__file__).parent / "fixtures" / "nsight"
GEMM = "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn"
NCCL = "ncclDevKernel_AllGather_RING_LL(ncclDevComm *, unsigned long, ncclWork *)"


def load(name: str, report: str):
    return read_stats((FIXTURES / f"documented_{name}.csv").read_text(), report)


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        ("cudaapisum_2022", "cuda_api_sum_2024", "cuda_api"),
        ("gpumemtimesum_2022", "cuda_gpu_mem_time_sum_2024", "memory_time"),
    ],
)
def test_both_generations_give_the_same_table(old, new, kind):
    a = load(old, report_for(kind).names[0])
    b = load(new, report_for(kind).names[1])
    assert list(a.columns) == list(COLUMNS) == list(b.columns)
    assert a[["calls", "total_ns", "min_ns", "max_ns"]].equals(
        b[["calls", "total_ns", "min_ns", "max_ns"]]
    )


def test_api_summary_values_in_kit_units():
    table = load("cudaapisum_2022", "cudaapisum").set_index("name")
    sync = table.loc["cudaStreamSynchronize"]
    assert (sync["calls"], sync["total_ns"], sync["min_ns"], sync["max_ns"]) == (
        50,
        161000000,
        2900000,
        4100000,
    )
    assert sync["share"] == pytest.approx(0.805) and sync["avg_ns"] == pytest.approx(3220000.0)
    assert table["calls"].dtype == "int64" and table["total_ns"].dtype == "int64"


def test_kernel_summary_2022_keeps_launch_shapes_and_quoted_names():
    table = load("gpukernsum_2022", "gpukernsum")
    assert list(table.columns) == [*COLUMNS, "grid", "block"]
    assert table["name"].tolist()[:2] == [GEMM, NCCL]  # a name with commas survives the CSV
    assert table.loc[0, "grid"].split() == ["32", "16", "1"]


def test_kernel_rows_split_by_launch_shape_merge_by_name():
    merged = by_name(load("gpukernsum_2022", "gpukernsum")).set_index("name")
    newer = load("cuda_gpu_kern_sum_2024", "cuda_gpu_kern_sum").set_index("name")
    gemm = merged.loc[GEMM]
    assert (gemm["calls"], gemm["total_ns"], gemm["min_ns"], gemm["max_ns"]) == (
        300,
        140000000,
        300000,
        561000,
    )
    assert gemm["share"] == pytest.approx(0.70)
    assert gemm["avg_ns"] == pytest.approx(newer.loc[GEMM, "avg_ns"], abs=0.1)
    assert gemm["med_ns"] != gemm["med_ns"]  # NaN: medians of two groups do not combine
    assert merged.loc[NCCL, "med_ns"] == 499000.0  # a single row keeps its own


def test_unknown_layout_is_refused_with_expected_and_found_columns():
    text = "Time(%),Total Time,Calls,Name\n50.0,100,2,gemm\n"
    with pytest.raises(TraceFormatError) as err:
        read_stats(text, "cuda_gpu_kern_sum", where="k.csv")
    message = str(err.value)
    assert "k.csv is not an nsys gpukernsum/cuda_gpu_kern_sum report" in message
    assert "expected columns ['Time (%)', 'Total Time (ns)', 'Instances'" in message
    assert "found ['Time(%)', 'Total Time', 'Calls', 'Name']" in message


def test_other_time_units_become_ns():
    text = (
        "Time (%),Total Time (us),Instances,Avg (us),Med (us),Min (us),Max (us),StdDev (us),Name\n"
        "100.0,1500,3,500.0,500.0,400,600,100.0,gemm\n"
    )
    row = read_stats(text, "kernels").iloc[0]
    assert (row["total_ns"], row["min_ns"], row["max_ns"]) == (1500000, 400000, 600000)
    assert row["avg_ns"] == 500000.0


def test_nsys_error_line_is_raised_not_parsed():
    with pytest.raises(
        TraceFormatError, match="nsys said \"ERROR: Report 'x' could not be found.\""
    ):
        read_stats("ERROR: Report 'x' could not be found.\n", "nvtx")


def test_top_kernels_sum_ranks_and_plot_bars(tmp_path):
    import pandas as pd

    one = load("cuda_gpu_kern_sum_2024", "cuda_gpu_kern_sum")
    table = pd.concat([one.assign(rank=0), one.assign(rank=1)], ignore_index=True)
    top = top_rows(table, top=2)
    assert top["name"].tolist() == [GEMM, NCCL]
    assert top["total_ns"].tolist() == [280000000, 100000000]
    plot = plot_top_kernels(table, top=2, rank=1)
    bars = [p.get_width() for p in plot.fig.axes[0].patches]
    assert bars == pytest.approx([140.0, 50.0])  # ms
    assert plot.fig.axes[0].get_title() == "Top kernels (rank 1)"


def test_empty_summary_cannot_be_plotted():
    empty = read_stats("", "kernels")
    with pytest.raises(SpecError, match="the summary has no rows"):
        plot_top_kernels(empty)


def test_newer_nsys_banner_lines_are_skipped():
    text = (
        "Generating SQLite file rep_0.sqlite from rep_0.nsys-rep\n"
        "\n ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):\n\n"
        + (FIXTURES / "documented_cuda_gpu_kern_sum_2024.csv").read_text()
    )
    assert read_stats(text, "kernels")["calls"].tolist() == [300, 100, 400]
