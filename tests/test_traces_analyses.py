"""Analyses on small hand-built trace tables whose right answers are worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_traces_analyses_tables import table

from hpcprof_kit import traces as A
from hpcprof_kit.errors import SpecError, TraceFormatError
from hpcprof_kit.traces.analyses import intervals as iv

PART_COLS = [f"{p}_ns" for p in A.PARTS]

# One CUDA-like step: host ops, a launch, a kernel, an NCCL kernel that overlaps it, a copy.
DEVICE_STEP = [
    (0, "cpu", "ProfilerStep#3", 0, 1000),
    (0, "cpu", "aten::mm", 100, 300),
    (0, "cpu", "aten::add", 150, 50),
    (0, "runtime", "cudaLaunchKernel", 200, 20),
    (0, "gpu", "gemm", 250, 400),
    (0, "comm_dev", "ncclKernel_AllReduce", 500, 300),
    (0, "memcpy", "Memcpy HtoD", 50, 100),
]

# One gloo step on CPU: the main thread (1) waits in c10d::allreduce_ inside backward while the
# gloo thread (2) does the all-reduce.
CPU_STEP = [
    (0, "cpu", "ProfilerStep#0", 0, 1000, 1),
    (0, "cpu", "aten::linear", 0, 300, 1),
    (0, "cpu", "autograd::backward", 300, 500, 1),
    (0, "comm", "c10d::allreduce_", 500, 200, 1),
    (0, "comm", "gloo:all_reduce", 450, 300, 2),
]


def test_device_step_breakdown_by_hand():
    bd = A.step_breakdown(table(DEVICE_STEP))
    row = bd.iloc[0]
    # compute first: gemm [250,650), of which [500,650) under the NCCL kernel is hidden comm;
    # the kernel's rest [650,800) is exposed; copy [50,150) (before any kernel); host-only:
    # ops [100,400) minus device busy = [150,250); idle = the rest of [0,1000).
    assert (row["rank"], row["step"], row["kind"]) == (0, 3, "device")
    assert A.PARTS == ("compute", "hidden_comm", "exposed_comm", "memory", "host", "idle")
    assert row[PART_COLS].tolist() == [250, 150, 150, 100, 100, 250]
    assert row[PART_COLS].sum() == row["wall_ns"] == 1000


def test_cpu_only_trace_gets_a_cpu_breakdown_not_an_empty_frame():
    bd = A.step_breakdown(table(CPU_STEP))
    row = bd.iloc[0]
    # comm = [450,750); compute = thread 1 busy [0,800) minus its own wait [500,700):
    # [0,500) + [700,800), of which [450,500) + [700,750) run with comm (hidden, 100);
    # compute alone 500; exposed comm [500,700) = 200; idle = 200.
    assert row["kind"] == "cpu"
    assert row[PART_COLS].tolist() == [500, 100, 200, 0, 0, 200]


def test_your_own_ranges_label_time_but_do_not_turn_waiting_into_compute():
    # a record_function range around the whole step body, waiting on the all-reduce included
    df = table([*CPU_STEP, (0, "cpu", "my_step", 0, 1000, 1)])
    df.loc[df["name"] == "my_step", "cat"] = "user_annotation"
    assert A.step_breakdown(df)[PART_COLS].iloc[0].tolist() == [500, 100, 200, 0, 0, 200]
    # torch records gloo's collective as a range too (comm track): it stays communication
    df.loc[df["name"] == "gloo:all_reduce", "cat"] = "user_annotation"
    assert A.step_breakdown(df)[PART_COLS].iloc[0].tolist() == [500, 100, 200, 0, 0, 200]


def test_comm_overlap_hidden_and_exposed():
    dev = A.comm_overlap(table(DEVICE_STEP)).iloc[0]
    assert (dev["comm_ns"], dev["hidden_ns"], dev["exposed_ns"]) == (300, 150, 150)
    assert dev["overlap_ratio"] == pytest.approx(0.5)
    cpu = A.comm_overlap(table(CPU_STEP)).iloc[0]
    # gloo thread [450,750) against main-thread compute [0,500) + [700,800): 50 + 50 hidden
    assert (cpu["comm_ns"], cpu["hidden_ns"], cpu["exposed_ns"]) == (300, 100, 200)


def test_trace_without_steps_is_one_whole_trace_pseudo_step():
    bd = A.step_breakdown(table([(0, "cpu", "aten::mm", 10, 90), (0, "cpu", "aten::add", 200, 50)]))
    assert bd["step"].tolist() == [-1]
    assert bd["span"].iloc[0].startswith("whole trace")
    assert bd["wall_ns"].iloc[0] == 240 and bd["idle_ns"].iloc[0] == 100


def test_rank_steps_names_the_straggler_and_spread():
    events = []
    for rank, walls in {
        0: (1_000_000, 2_000_000),
        1: (1_500_000, 2_000_000),
        2: (1_000_000, 5_000_000),
    }.items():
        t = 0
        for step, wall in enumerate(walls):
            events.append((rank, "cpu", f"ProfilerStep#{step}", t, wall))
            t += wall
    rs = A.rank_steps(table(events))
    assert rs.loc[0, [0, 1, 2]].tolist() == [1.0, 1.5, 1.0]
    assert rs["straggler"].tolist() == [1, 2]
    assert rs["spread_ms"].tolist() == [0.5, 3.0]
    assert rs.loc[1, "spread_pct"] == pytest.approx(150.0)


def test_top_ops_self_time_subtracts_direct_children_on_the_same_thread():
    top = A.top_ops(table(DEVICE_STEP))
    assert top.index.tolist() == ["aten::mm", "aten::add"]  # by self time
    assert top.loc["aten::mm", "self_ms"] == pytest.approx(250e-6)
    assert top.loc["aten::mm", "total_ms"] == pytest.approx(300e-6)
    assert top["share"].sum() == pytest.approx(1.0)
    kernels = A.top_kernels(table(DEVICE_STEP))
    assert kernels.loc["gemm", "self_ms"] == pytest.approx(400e-6)
    assert kernels.index[0] == "gemm"


def test_unitrace_kernel_geometry_is_grouped_by_kernel():
    df = table(
        [
            (0, "gpu", "gemm[SIMD32 {8; 1; 1} {64; 1; 1}]", 0, 10),
            (0, "gpu", "gemm[SIMD16 {4; 1; 1} {64; 1; 1}]", 20, 30),
        ]
    )
    top = A.top_kernels(df)
    assert top.index.tolist() == ["gemm"] and top.loc["gemm", "count"] == 2


def test_same_name_summary_and_occurrences():
    events = [
        (r, "cpu", "aten::mm", 1000 * i, d)
        for r, durs in ((0, (10, 20, 30)), (1, (40,)))
        for i, d in enumerate(durs)
    ]
    s = A.same_name(table(events), "aten::mm")
    assert s.index.tolist() == ["0", "1", "all"]
    assert s.loc["all", ["count", "min_us", "median_us", "max_us"]].tolist() == [
        4,
        0.01,
        0.025,
        0.04,
    ]
    assert s.loc["0", "total_ms"] == pytest.approx(60e-6)
    assert len(s.attrs["occurrences"]) == 4


def test_same_name_unknown_name_suggests_close_names():
    with pytest.raises(SpecError, match=r"name='aten::m' .*close names: \['aten::mm'"):
        A.same_name(table(DEVICE_STEP), "aten::m")


def test_bad_n_and_bad_table_raise_kit_errors():
    with pytest.raises(SpecError, match="n=0"):
        A.top_ops(table(DEVICE_STEP), n=0)
    with pytest.raises(TraceFormatError, match="missing"):
        A.step_breakdown(table(DEVICE_STEP).drop(columns=["track"]))


def test_compare_runs_per_op_and_per_step():
    fast = [(r, t, n, ts // 2, d // 2) for r, t, n, ts, d in DEVICE_STEP]
    diff = A.compare_runs(table(DEVICE_STEP), table(fast), labels=("eager", "compiled"))
    assert diff.loc["aten::mm", "self_diff_ms"] == pytest.approx(-125e-6)
    steps = diff.attrs["steps"]
    assert steps.loc["mean", "wall_ms_eager"] == pytest.approx(1e-3)
    assert steps.loc["mean", "speedup"] == pytest.approx(2.0)
    with pytest.raises(SpecError, match="labels"):
        A.compare_runs(table(DEVICE_STEP), table(fast), labels=("x", "x"))


def _brute(starts, ends, lo, hi):
    busy = np.zeros(hi, dtype=bool)
    for s, e in zip(starts, ends, strict=True):
        busy[s:e] = True
    return int(busy[lo:hi].sum())


spans = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 60)), min_size=0, max_size=25)


@settings(max_examples=60, deadline=None)
@given(a=spans, b=spans, lo=st.integers(0, 100), width=st.integers(0, 200))
def test_union_measure_and_subtract_match_a_brute_force_count(a, b, lo, width):
    hi = lo + width
    a_s, a_e = (
        np.array([s for s, _ in a], dtype=np.int64),
        np.array([s + d for s, d in a], dtype=np.int64),
    )
    b_s, b_e = (
        np.array([s for s, _ in b], dtype=np.int64),
        np.array([s + d for s, d in b], dtype=np.int64),
    )
    ua, ub = iv.union(a_s, a_e), iv.union(b_s, b_e)
    assert iv.measure(*ua, lo, hi) == _brute(a_s, a_e, lo, hi)
    rest = iv.subtract(ua, ub)
    mask_a = np.zeros(400, bool)
    for s, e in zip(a_s, a_e, strict=True):
        mask_a[s:e] = True
    for s, e in zip(b_s, b_e, strict=True):
        mask_a[s:e] = False
    assert iv.measure(*rest, 0, 400) == int(mask_a.sum())


kinds = st.sampled_from(["cpu", "runtime", "gpu", "comm_dev", "memcpy", "memset", "comm"])
events = st.lists(
    st.tuples(kinds, st.integers(0, 900), st.integers(1, 400)), min_size=1, max_size=30
)


@settings(max_examples=60, deadline=None)
@given(evs=events)
def test_parts_always_add_up_to_the_step_wall_time(evs):
    rows = [(0, "cpu", "ProfilerStep#1", 100, 600)] + [
        (0, k, f"ev{i}", ts, d) for i, (k, ts, d) in enumerate(evs)
    ]
    bd = A.step_breakdown(table(rows))
    assert (bd[PART_COLS] >= 0).all().all()
    assert (bd[PART_COLS].sum(axis=1) == bd["wall_ns"]).all()


@settings(max_examples=60, deadline=None)
@given(evs=events)
def test_comm_overlap_is_the_breakdown_summed(evs):
    rows = [(0, "cpu", "ProfilerStep#1", 100, 600), (0, "cpu", "ProfilerStep#2", 700, 300)] + [
        (0, k, f"ev{i}", ts, d) for i, (k, ts, d) in enumerate(evs)
    ]
    df = table(rows)
    bd = A.step_breakdown(df)
    ov = A.comm_overlap(df).iloc[0]
    assert ov["exposed_ns"] == bd["exposed_comm_ns"].sum()
    assert ov["hidden_ns"] == bd["hidden_comm_ns"].sum()
    assert ov["compute_ns"] == (bd["compute_ns"] + bd["hidden_comm_ns"]).sum()
    # hidden comm measured directly: comm and compute at the same instant, inside the steps
    from hpcprof_kit.traces.analyses.breakdown import rank_sets

    _, sets = rank_sets(df)
    both = iv.union_of(sets["comm"], sets["compute"])
    direct = sum(
        iv.measure(*sets["comm"], lo, hi) + iv.measure(*sets["compute"], lo, hi)
        - iv.measure(*both, lo, hi)
        for lo, hi in ((100, 700), (700, 1000))
    )  # fmt: skip
    assert ov["hidden_ns"] == direct
