"""The timeline a learner reads: depth lanes, phases, labels, zoom and flows, on a recorded trace.

The fixture is notebook 05's run: the train app (a small Transformer under DDP, gloo) on 2 CPU
ranks, recording steps 2 and 3 (tests/fixtures/traces/ddp_cpu_2rank, rank files gzipped).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_traces_analyses_tables import table

from hpcprof_kit import traces
from hpcprof_kit.errors import SpecError
from hpcprof_kit.traces.analyses import lanes as L
from hpcprof_kit.traces.analyses.breakdown import step_spans

DDP = Path(__file__).parent / "fixtures" / "traces" / "ddp_cpu_2rank"
PHASE_NAMES = ["forward", "backward", "optimizer"]


@pytest.fixture(scope="module")
def ddp():
    return traces.load(DDP, cache=False)


@pytest.fixture(scope="module")
def whole(ddp):
    return traces.plot_timeline(ddp)


def _main_thread(bars, rank):
    mine = bars[bars["rank"] == rank]
    return mine[mine["lane"] == mine["lane"].iat[0]]  # the thread recording the steps is first


def test_steps_then_phases_then_work_read_top_down_on_both_ranks(whole):
    for rank in (0, 1):
        main = _main_thread(whole.bars, rank)
        top = main[main["depth"] == 0]
        assert top["name"].tolist() == ["ProfilerStep#2", "ProfilerStep#3"]
        assert top["label"].tolist() == ["#2", "#3"]  # step boundaries labelled #N
        level1 = main[(main["depth"] == 1) & main["name"].isin(PHASE_NAMES)]
        assert level1["name"].tolist() == PHASE_NAMES * 2  # in time order, one set per step
        assert level1["phase"].tolist() == PHASE_NAMES * 2
        assert (level1["events"] == 1).all()  # wide: drawn as themselves, never merged
        assert {"data loading", "forward", "backward", "optimizer", "communication"} <= set(
            main["phase"]
        )


def test_a_step_zoomed_in_writes_each_phase_name_on_its_slice(ddp):
    plot = traces.plot_timeline(ddp, step=3)
    for rank in (0, 1):
        main = _main_thread(plot.bars, rank)
        step = main[main["name"] == "ProfilerStep#3"].iloc[0]
        inside = main[(main["start_ms"] >= step["start_ms"]) & (main["end_ms"] <= step["end_ms"])]
        named = inside[inside["name"].isin(PHASE_NAMES)]
        assert named["label"].tolist() == PHASE_NAMES
    ax = plot.fig.axes[0]
    written = {t.get_text() for t in ax.texts}
    assert {"#3", "forward", "backward", "optimizer", "gloo:all_reduce"} <= written
    assert [t.get_text() for t in ax.get_legend().get_texts()][:5] == [
        "forward", "backward", "optimizer", "data loading", "communication",
    ]  # fmt: skip


def test_the_all_reduce_overlaps_backward_on_each_rank(whole):
    bars = whole.bars
    for rank in (0, 1):
        main = _main_thread(bars, rank)
        backward = main[main["name"] == "backward"]
        gloo = bars[(bars["rank"] == rank) & (bars["name"] == "gloo:all_reduce")]
        assert len(gloo) == 2 and (gloo["lane"] != main["lane"].iat[0]).all()  # its own thread
        assert (gloo["phase"] == "communication").all()
        for _, ar in gloo.iterrows():
            assert (
                (backward["start_ms"] < ar["end_ms"]) & (ar["start_ms"] < backward["end_ms"])
            ).any()
        # DDP's host side of the collective waits inside backward, three levels down
        host = main[main["name"] == "c10d::allreduce_"]
        assert host["depth"].tolist() == [3, 3] and (host["phase"] == "communication").all()


def test_merged_counts_add_up_to_every_slice_drawn(ddp, whole):
    drawable = len(ddp) - 6  # 2 instants and the profiler's whole-trace span per rank
    lanes = whole.table
    assert int(lanes["events"].sum()) == drawable == 10_928
    assert (lanes["merged"] == lanes["events"] - lanes["bars"]).all()
    work = whole.bars[whole.bars["phase"] != "idle"]
    assert int(work["events"].sum()) == drawable and len(work) == int(lanes["bars"].sum())
    assert (
        whole.fig.axes[0]
        .get_title()
        .startswith(
            f"10,928 slices drawn as {len(work):,} bars in {len(lanes)} lanes; "
            f"{drawable - len(work):,} merged (under a pixel at their level"
        )
    )
    # each lane's slices, one level of one thread: its bars never overlap
    for _, lane in work.groupby(["rank", "lane", "depth", "phase"]):
        assert (lane["start_ms"].to_numpy()[1:] >= lane["end_ms"].to_numpy()[:-1]).all()


def test_max_depth_folds_deeper_levels_and_still_counts_them(ddp, whole):
    shallow = traces.plot_timeline(ddp, max_depth=2)
    lanes = shallow.table
    assert lanes["depth"].max() == 2
    assert int(lanes["events"].sum()) == int(whole.table["events"].sum())
    deeper = int(whole.table.loc[whole.table["depth"] > 2, "events"].sum())
    assert int(lanes["folded"].sum()) == deeper
    assert f"{deeper:,} below level 2 drawn in it" in shallow.fig.axes[0].get_title()


def test_ranks_and_threads_choose_the_lanes(ddp):
    one = traces.plot_timeline(ddp, ranks=[1], threads=["6250"])
    assert set(one.table["rank"]) == {1} and set(one.table["lane"]) == {"thread 6250"}
    labels = [t.get_text() for t in one.fig.axes[0].get_yticklabels()]
    assert labels[:3] == ["rank 1 thread 6250 · 0", "· 1", "· 2"]
    with pytest.raises(SpecError, match=r"threads=\['nope'\] selects no events; pick from"):
        traces.plot_timeline(ddp, threads=["nope"])


def test_zoom_windows_by_step_and_by_time(ddp):
    step3 = traces.plot_timeline(ddp, step=3)
    spans = step_spans(ddp)
    s3 = spans[spans["step"] == 3]
    origin = int(ddp.loc[L.drawable(ddp), "ts_ns"].min())
    expected = ((s3["start_ns"].min() - origin) / 1e6, (s3["end_ns"].max() - origin) / 1e6)
    assert step3.fig.axes[0].get_xlim() == pytest.approx(expected)
    top = step3.bars[step3.bars["depth"] == 0]
    assert len(top[top["name"] == "ProfilerStep#3"]) == 2  # step 3 of each rank
    window = traces.plot_timeline(ddp, start=20.0, end=25.0)
    assert window.fig.axes[0].get_xlim() == pytest.approx((20.0, 25.0))
    assert int(window.table["events"].sum()) < int(step3.table["events"].sum())
    with pytest.raises(SpecError, match=r"step=9 is not in this trace; its steps are \[2, 3\]"):
        traces.plot_timeline(ddp, step=9)
    with pytest.raises(SpecError, match="the window holds no slices; widen it"):
        traces.plot_timeline(ddp, start=1e6, end=2e6)


def test_flows_link_the_same_collective_across_ranks(ddp):
    plot = traces.plot_timeline(ddp, flows=True)
    flows = plot.table.attrs["flows"]
    pairs = sorted(zip(flows["name"], flows["rank_from"], flows["rank_to"], strict=True))
    assert pairs == [("c10d::allreduce_", 0, 1)] * 2 + [("gloo:all_reduce", 0, 1)] * 2
    assert len(plot.fig.axes[0].collections[-1].get_segments()) == 4
    assert "flows" not in traces.plot_timeline(ddp).table.attrs  # off unless asked


def test_kernels_take_the_phase_of_their_launch_and_flows_link_them():
    df = table([
        (0, "cpu", "ProfilerStep#1", 0, 1000),
        (0, "cpu", "forward", 10, 400),
        (0, "runtime", "cudaLaunchKernel", 20, 10),
        (0, "cpu", "backward", 500, 400),
        (0, "runtime", "cudaLaunchKernel", 510, 10),
        (0, "gpu", "gemm", 40, 300),
        (0, "gpu", "gemm_bwd", 530, 300),
        (0, "memcpy", "Memcpy HtoD", 850, 100),
    ])  # fmt: skip
    df["corr"] = np.array([-1, -1, 7, -1, 8, 7, 8, -1])
    plot = traces.plot_timeline(df, flows=True)
    kernels = plot.bars[plot.bars["lane"] == "dev 0 stream 7"].set_index("name")
    assert kernels.loc[["gemm", "gemm_bwd", "Memcpy HtoD"], "phase"].tolist() == [
        "forward", "backward", "memory copy",
    ]  # fmt: skip
    launch = plot.table.attrs["flows"]
    assert launch["kind"].tolist() == ["launch", "launch"]
    assert launch["ms_to"].tolist() == pytest.approx([4e-5, 5.3e-4])


def test_idle_gaps_are_drawn_but_counted_apart(ddp):
    plot = traces.plot_timeline(ddp, step=3, ranks=[0])
    idle = plot.bars[plot.bars["phase"] == "idle"]
    assert len(idle) and (idle["events"] == 0).all()
    gloo = idle[idle["lane"] == "thread 6546"]  # the gloo thread waits most of the step
    assert gloo["end_ms"].sub(gloo["start_ms"]).sum() > 10


def _stack_depths(ts, te):
    """Reference: the stack walk Perfetto does, one slice at a time."""
    order = sorted(range(len(ts)), key=lambda i: (ts[i], -(te[i] - ts[i])))
    depth, stack = [0] * len(ts), []
    for i in order:
        while stack and te[stack[-1]] <= ts[i]:
            stack.pop()
        depth[i] = len(stack)
        stack.append(i)
    return depth


@st.composite
def nested(draw, lo=0, hi=10_000, level=0):
    """Properly nested slices inside [lo, hi)."""
    out, at = [], lo
    for _ in range(draw(st.integers(0, 3 if level < 3 else 0))):
        a = draw(st.integers(at, hi))
        b = draw(st.integers(a + 1, hi + 1)) if a < hi else hi + 1
        out.append((a, b))
        out += draw(nested(a, b - 1, level + 1)) if b - a > 2 else []
        at = b
        if at >= hi:
            break
    return out


@settings(max_examples=60, deadline=None)
@given(slices=nested())
def test_vectorised_depths_match_a_stack_walk(slices):
    if not slices:
        return
    ts = np.array([a for a, _ in slices], dtype=np.int64)
    te = np.array([b for _, b in slices], dtype=np.int64)
    got = L.slice_depths(np.zeros(ts.size, dtype=np.int64), ts, te)
    assert got.tolist() == _stack_depths(ts.tolist(), te.tolist())


def test_real_gpu_trace_draws_streams_with_kernels_phased_by_their_launch(shared_traces):
    df = traces.load(shared_traces / "hta" / "cuda_1rank_ns_resolution.json.gz", cache=False)
    plot = traces.plot_timeline(df, step=102, flows=True)
    lanes = plot.table
    assert lanes["lane"].iat[0] == "thread 1102"  # the thread recording the steps comes first
    stream = plot.bars[plot.bars["lane"] == "dev 0 stream 7"]
    assert {"forward", "backward", "memory copy"} <= set(stream["phase"])
    main = plot.bars[(plot.bars["lane"] == "thread 1102") & (plot.bars["depth"] == 1)]
    assert main.loc[main["label"] != "", "label"].tolist()[:2] == [
        "## forward ##",
        "## backward ##",
    ]
    assert (plot.table.attrs["flows"]["kind"] == "launch").sum() > 100
