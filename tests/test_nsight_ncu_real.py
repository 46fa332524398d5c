"""Nsight Compute exports recorded on a real H100 (ncu 2025.3.1, torch 2.11+cu130; see
docs/gpu-check.md): the Polaris ncu jobs' own tracer wrapper around the kit's apps, exported
with ``ncu --csv --page raw|details``. What a learner reads off them: kernel times in ns,
clocks in cycles per second, the fp32 and tensor-core roofline numbers, and ncu's own advice."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from hpcprof_kit.nsight import read_ncu_details, read_ncu_raw, read_ncu_rules, roofline_table
from hpcprof_kit.nsight.plots import plot_roofline

FIXTURES = Path(__file__).parent / "fixtures" / "nsight"
FP32_GEMM = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1"
BF16_GEMM = "nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_NNN"  # cuBLAS on Hopper: no "gemm"


def export(name: str) -> str:
    return gzip.open(FIXTURES / f"h100_ncu2025_{name}.csv.gz", "rt").read()


def test_real_raw_page_units_spelled_the_2025_way_become_the_kits():
    raw = read_ncu_raw(export("seqpar_roofline_raw"))
    assert raw["id"].tolist() == [0, 1, 2, 3]  # steps 3-4 x two matmuls: the capture window
    assert raw.loc[0, "name"].startswith(FP32_GEMM)
    units = raw.attrs["units"]
    # "us", "Ghz", "Gbyte/s", "Kbyte/cycle" in the export
    assert raw.loc[0, "gpu__time_duration.sum"] == pytest.approx(220_832.0)
    assert units["gpu__time_duration.sum"] == "nsecond"
    assert raw.loc[0, "sm__cycles_elapsed.avg.per_second"] == pytest.approx(1.580263e9)
    assert units["sm__cycles_elapsed.avg.per_second"] == "cycle/second"
    assert raw.loc[0, "dram__bytes.sum.per_second"] == pytest.approx(80.701348e9)
    assert units["dram__bytes.sum.per_second"] == "byte/second"
    assert raw.loc[0, "dram__bytes.sum.peak_sustained"] == pytest.approx(1280.0)
    assert units["dram__bytes.sum.peak_sustained"] == "byte/cycle"
    assert raw.loc[0, "launch__grid_size"] == 1152  # "1,152"


def test_real_fp32_roofline_matches_ncus_own_derived_metrics_and_the_h100_peaks():
    raw = read_ncu_raw(export("seqpar_roofline_raw"))
    roof = roofline_table(raw)
    fp32 = roof[roof["precision"] == "fp32"].set_index("id")
    assert fp32.index.tolist() == [0, 1, 2, 3]
    clock = raw.loc[0, "sm__cycles_elapsed.avg.per_second"]
    # ncu's derived "ffma x2" is the FLOP per cycle; fadd and fmul did nothing in launch 0
    flop_per_cycle = raw.loc[0, "derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2"]
    assert fp32.loc[0, "flop_per_s"] == pytest.approx(flop_per_cycle * clock, rel=1e-6)
    # H100 SXM: 16,896 fp32 FMA lanes x 2 FLOP at the 1.58 GHz ncu ran at = 53.4 TFLOP/s;
    # HBM3 1.28 KB per cycle at 2.62 GHz = 3.35 TB/s
    assert fp32.loc[0, "peak_flop_per_s"] == pytest.approx(53.40e12, rel=1e-3)
    assert fp32.loc[0, "peak_bytes_per_s"] == pytest.approx(3.352e12, rel=1e-3)
    assert fp32.loc[0, "flop_per_s"] / fp32.loc[0, "peak_flop_per_s"] == pytest.approx(
        0.615, abs=1e-3
    )
    ridge = fp32.loc[0, "peak_flop_per_s"] / fp32.loc[0, "peak_bytes_per_s"]
    assert (fp32["intensity"] > 10 * ridge).all()  # these GEMMs are compute bound
    assert "fp64" not in set(roof["precision"])  # no double-precision work at all


def test_real_half_precision_counts_a_pair_per_instruction():
    raw = read_ncu_raw(export("seqpar_roofline_raw"))
    fp16 = roofline_table(raw).query("precision == 'fp16'").set_index("id")
    per_cycle = raw.loc[0, "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum.per_cycle_elapsed"]
    clock = raw.loc[0, "sm__cycles_elapsed.avg.per_second"]
    assert fp16.loc[0, "flop_per_s"] == pytest.approx(4 * per_cycle * clock)  # ncu: hfma x4
    assert fp16.loc[0, "peak_flop_per_s"] == pytest.approx(
        raw.loc[0, "derived__sm__sass_thread_inst_executed_op_hfma_pred_on_x4"] * clock
    )


@pytest.mark.parametrize("name", ["seqpar_bf16_roofline_raw", "seqpar_bf16_full_raw"])
def test_real_bf16_gemm_is_tensor_core_work_with_its_own_row_and_ceiling(name):
    raw = read_ncu_raw(export(name))
    assert raw.loc[0, "name"] == BF16_GEMM
    roof = roofline_table(raw)
    assert set(roof["precision"]) == {"tensor bf16"}  # the FP pipes did no work
    row = roof.set_index("id").loc[0]
    ops = raw.loc[0, "sm__ops_path_tensor_src_bf16_dst_fp32.sum.per_second"]
    assert row["flop_per_s"] == pytest.approx(ops)  # 404 TFLOP/s
    # the dense peak (4,096 per SM per cycle), not the 2:4-sparse one (8,192)
    hgmma = "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum"
    assert row["peak_flop_per_s"] == pytest.approx(
        raw.loc[0, f"{hgmma}.peak_sustained_elapsed.per_second"]
    )
    assert row["flop_per_s"] / row["peak_flop_per_s"] == pytest.approx(
        raw.loc[0, f"{hgmma}.pct_of_peak_sustained_elapsed"] / 100, abs=0.01
    )  # ncu's own percent of peak: about 54
    plot = plot_roofline(roof)
    assert [line.get_label() for line in plot.fig.axes[0].get_lines()] == ["tensor bf16 ceiling"]


def test_the_seqpar_ncu_jobs_filter_caught_hoppers_bf16_gemms_in_the_capture_window():
    # NCU_KERNEL='regex:gemm|nvjet' as jobs/polaris/seqpar-ncu.sh exports it; "gemm" alone
    # profiled nothing here (ncu: "No kernels were profiled")
    raw = read_ncu_raw(export("seqpar_bf16_roofline_raw"))
    assert raw["name"].tolist() == [BF16_GEMM, "nvjet_sm90_tst_128x80_64x8_2x4_h_bz_NNT"] * 2
    assert (
        "export NCU_KERNEL='regex:gemm|nvjet'"
        in (Path(__file__).parents[1] / "jobs" / "polaris" / "seqpar-ncu.sh").read_text()
    )


def test_real_detailed_set_gives_the_roofline_too():
    roof = roofline_table(read_ncu_raw(export("train_detailed_raw")))
    assert set(roof["precision"]) == {"fp32"}
    assert (roof["flop_per_s"] < 0.01 * roof["peak_flop_per_s"]).all()  # laptop-sized model


def test_real_details_page_keeps_metrics_in_kit_units_and_leaves_rules_out():
    details = read_ncu_details(export("train_detailed_details"))
    assert (details["metric"] != "").all()
    launch = details[details["id"] == 0].set_index("metric")
    assert launch.loc["Duration", ["unit", "value"]].tolist() == [
        "nsecond",
        pytest.approx(11_620.0),
    ]
    assert launch.loc["SM Frequency", "unit"] == "cycle/second"
    assert launch.loc["SM Frequency", "value"] == pytest.approx(1.58e9)
    assert launch.loc["Elapsed Cycles", "unit"] == "cycle"
    sections = set(details["section"])
    assert {"GPU Speed Of Light Throughput", "Occupancy", "Launch Statistics"} <= sections


def test_real_rules_are_ncus_advice_largest_estimated_speedup_first():
    rules = read_ncu_rules(export("train_detailed_details"))
    assert rules["speedup_pct"].dropna().is_monotonic_decreasing
    assert set(rules["type"]) <= {"OPT", "INF", "WRN", "ERR"}
    launch = rules[(rules["id"] == 0) & (rules["rule"] == "LaunchConfiguration")].iloc[0]
    assert launch["type"] == "OPT" and launch["speedup_scope"] == "global"
    assert launch["speedup_pct"] == pytest.approx(90.91)
    assert "only 12 blocks, which is less than the GPU's 132 multiprocessors" in launch["advice"]
    assert rules.iloc[0]["rule"] == "HighPipeUtilization"


def test_rules_of_an_export_without_rule_columns_are_an_empty_table():
    text = (FIXTURES / "documented_ncu_details_2023.csv").read_text()
    rules = read_ncu_rules(text)
    assert rules.empty and rules.columns[:3].tolist() == ["id", "name", "section"]


def test_the_shipped_samples_are_these_recordings_and_a_bad_page_is_refused():
    from hpcprof_kit.errors import SpecError
    from hpcprof_kit.nsight import sample_ncu_export

    assert sample_ncu_export("raw") == export("seqpar_bf16_roofline_raw")
    assert sample_ncu_export("details") == export("train_detailed_details")
    with pytest.raises(SpecError, match=r"page 'source' has no sample export; use one of"):
        sample_ncu_export("source")
