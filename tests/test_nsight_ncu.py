"""Nsight Compute CSV exports (documented layouts: no GPU here): raw and details pages of
both generations, units, the roofline numbers and picture, refused layouts."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.nsight.ncu import read_ncu_details, read_ncu_raw, roofline_table
from hpcprof_kit.nsight.plots import plot_roofline

FIXTURES = Path(__file__).parent / "fixtures" / "nsight"
GEMM = "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn"


def text(name: str) -> str:
    return (FIXTURES / f"documented_{name}.csv").read_text()


def test_raw_page_one_row_per_launch_in_kit_units():
    raw = read_ncu_raw(text("ncu_raw_2023"))
    assert raw["id"].tolist() == [0, 1]
    assert raw.loc[0, "name"] == GEMM and raw.loc[0, "grid"] == "(32, 16, 1)"
    assert raw.loc[0, "gpu__time_duration.sum"] == pytest.approx(549_820.0)  # usecond -> ns
    assert raw.loc[1, "dram__bytes.sum.per_second"] == pytest.approx(1.4e12)  # "1,400.00" GB/s
    units = raw.attrs["units"]
    assert units["gpu__time_duration.sum"] == "nsecond"
    assert units["sm__cycles_elapsed.avg.per_second"] == "cycle/second"


@pytest.mark.parametrize("generation", ["2022", "2023"])
def test_details_page_both_generations(generation):
    details = read_ncu_details(text(f"ncu_details_{generation}"))
    gemm = details[details["name"] == GEMM].set_index("metric")
    assert gemm.loc["Duration", "value"] == pytest.approx(549_820.0)
    assert gemm.loc["Duration", "unit"] == "nsecond"
    assert gemm.loc["DRAM Frequency", "value"] == pytest.approx(1.215e9)
    assert gemm.loc["Registers Per Thread", "value"] == 232
    assert gemm.loc["Achieved Occupancy", "section"] == "Occupancy"
    assert ("kernel_time" in details.columns) == (generation == "2022")


def test_roofline_numbers_from_raw_metrics():
    roof = roofline_table(read_ncu_raw(text("ncu_raw_2023"))).set_index("id")
    assert set(roof["precision"]) == {"fp32"}  # fp64/fp16 did no work in these launches
    gemm = roof.loc[0]
    # (10 + 10 + 2 x 4000) FLOP/cycle x 1.41e9 cycle/s; 300 GB/s from DRAM
    assert gemm["flop_per_s"] == pytest.approx(8020 * 1.41e9)
    assert gemm["intensity"] == pytest.approx(8020 * 1.41e9 / 3e11)
    assert gemm["peak_flop_per_s"] == pytest.approx(2 * 6912 * 1.41e9)  # A100 fp32: 19.5 TFLOP/s
    assert gemm["peak_bytes_per_s"] == pytest.approx(1280 * 1.22e9)
    assert roof.loc[1, "intensity"] < 1 < gemm["intensity"]  # elementwise: memory bound


def test_roofline_plot_has_ceiling_and_points():
    plot = plot_roofline(roofline_table(read_ncu_raw(text("ncu_raw_2023"))))
    ax = plot.fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert [line.get_label() for line in ax.get_lines()] == ["fp32 ceiling"]
    assert len(ax.collections[0].get_offsets()) == 2


def test_raw_page_without_roofline_metrics_is_refused():
    raw = read_ncu_raw(
        '"ID","Kernel Name","gpu__time_duration.sum"\n"","","usecond"\n"0","k","5"\n'
    )
    with pytest.raises(TraceFormatError, match=r"no roofline metrics: expected \['smsp__sass"):
        roofline_table(raw)


def test_details_layout_is_refused_with_expected_and_found():
    with pytest.raises(TraceFormatError) as err:
        read_ncu_details(
            '"ID","Kernel Name","Metric","Value"\n"0","k","Duration","5"\n', where="d.csv"
        )
    assert "d.csv is not an ncu CSV export" in str(err.value)
    assert "expected columns ['ID', 'Kernel Name', 'Section Name', 'Metric Name'" in str(err.value)
    assert "found ['ID', 'Kernel Name', 'Metric', 'Value']" in str(err.value)
