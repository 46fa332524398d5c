"""Plots and their table twins: what is drawn matches the numbers, and no event is hidden."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_traces_analyses import CPU_STEP, DEVICE_STEP
from test_traces_analyses_tables import table

from hpcprof_kit import traces as A
from hpcprof_kit.errors import SpecError
from hpcprof_kit.traces.analyses.lanes import lod_bars
from hpcprof_kit.traces.plots import charts as P
from hpcprof_kit.traces.plots.timeline import plot_timeline


def _busy_lane(n: int = 10_000) -> list[tuple]:
    # n one-microsecond kernels in 100 bursts over 1 s: far below a pixel each
    ts = [(i // 100) * 10_000_000 + (i % 100) * 2_000 for i in range(n)]
    return [(0, "cpu", "ProfilerStep#0", 0, 1_000_000_000)] + [
        (0, "gpu", "k", t, 1_000) for t in ts
    ]


def test_timeline_counts_every_event_and_merges_sub_pixel_ones():
    plot = plot_timeline(table(_busy_lane()), width_px=1000)
    lane = plot.table.set_index("lane").loc["dev 0 stream 7"]
    assert (lane["depth"], lane["events"]) == (0, 10_000)
    assert lane["bars"] == 100  # one bar per burst: the bursts are 10 px apart
    assert lane["merged"] == 9_900
    title = plot.fig.axes[0].get_title()
    assert "10,001 slices drawn as 101 bars in 2 lanes; 9,900 merged" in title
    assert plot.bars.loc[plot.bars["name"] == "ProfilerStep#0", "label"].tolist() == ["#0"]


def test_timeline_lanes_are_ranks_by_threads_and_streams_by_level():
    two_ranks = DEVICE_STEP + [(1, *ev[1:]) for ev in DEVICE_STEP]
    plot = plot_timeline(table(two_ranks))
    labels = [t.get_text() for t in plot.fig.axes[0].get_yticklabels()]
    assert labels[:5] == [
        "rank 0 thread 1 · 0",  # ProfilerStep#3
        "· 1",  # aten::mm
        "· 2",  # aten::add, then the launch
        "rank 0 dev 0 stream 7 · 0",  # the copy, then gemm
        "rank 0 dev 0 stream 13 · 0",  # the NCCL kernel
    ]
    assert len(labels) == 10 and labels[5] == "rank 1 thread 1 · 0"
    assert plot.bars.loc[plot.bars["depth"] == 0, "label"].tolist()[:1] == ["#3"]
    assert plot.table["busy_ms"].tolist()[:5] == pytest.approx([1e-3, 3e-4, 7e-5, 5e-4, 3e-4])


@settings(max_examples=50, deadline=None)
@given(
    ev=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 300)), min_size=1, max_size=60),
    npp=st.floats(0.5, 500),
)
def test_lod_bars_cover_every_event(ev, npp):
    s = np.array([a for a, _ in ev], dtype=np.int64)
    e = s + np.array([d for _, d in ev], dtype=np.int64)
    bs, be, counts = lod_bars(s, e, 0, npp)
    assert counts.sum() == len(ev)
    assert np.all(be[:-1] <= bs[1:])  # bars are disjoint (they may touch) and sorted
    for a, b in zip(s, e, strict=True):
        i = np.searchsorted(bs, a, side="right") - 1
        assert bs[i] <= a and b <= be[i]
        assert be[i] - bs[i] >= np.ceil(npp) or be[i] - bs[i] >= b - a


def test_breakdown_plot_draws_its_table():
    df = table(DEVICE_STEP + [(1, *ev[1:]) for ev in CPU_STEP])
    plot = P.plot_breakdown(df)
    bd = A.step_breakdown(df)
    assert plot.table["compute_ms"].tolist() == (bd["compute_ns"] / 1e6).tolist()
    heights = [p.get_height() for p in plot.fig.axes[0].patches]
    assert len(heights) == 2 * 6  # 2 (rank, step) bars x 6 parts
    assert sum(heights) == pytest.approx(plot.table["wall_ms"].sum())
    ax = plot.fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "compute (no comm meanwhile)",
        "hidden comm (under compute)",
        "exposed comm (no compute)",
        "memory copies/sets",
        "host only (device idle)",
        "idle",
    ]
    assert ax.get_title().startswith("step breakdown, compute first: comm under compute is hidden")
    # the device step: 0.15 us of its comm runs under the gemm, 0.15 us alone
    assert plot.table.loc[0, ["hidden_comm_ms", "exposed_comm_ms"]].tolist() == [15e-5, 15e-5]


def test_rank_heatmap_and_same_name_plots():
    events = [(r, "cpu", "ProfilerStep#0", 0, 1_000_000 * (r + 1)) for r in range(3)]
    events += [(r, "cpu", "aten::mm", 10 * i, 3 + i) for r in range(3) for i in range(5)]
    df = table(events)
    heat = P.plot_rank_heatmap(df)
    image = heat.fig.axes[0].get_images()[0].get_array()
    assert image.shape == (3, 1) and image[:, 0].tolist() == [1.0, 2.0, 3.0]
    assert heat.table["straggler"].tolist() == [2]
    dist = P.plot_same_name(df, "aten::mm")
    drawn = sum(len(p.get_xy()) > 0 for p in dist.fig.axes[0].patches)
    assert drawn == 3 and dist.table.loc["all", "count"] == 15


def test_bad_plot_arguments_raise_kit_errors(tmp_path):
    df = table(DEVICE_STEP)
    with pytest.raises(SpecError, match="width_px=10"):
        plot_timeline(df, width_px=10)
    with pytest.raises(SpecError, match="ranks=\\[7\\]"):
        plot_timeline(df, ranks=[7])
    out = plot_timeline(df).save(str(tmp_path / "t.png"))
    assert Path(out).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<img" in P.plot_breakdown(df)._repr_html_()


def test_breakdown_and_heatmap_draw_the_spread_above_max_ranks():
    events = [(r, *ev[1:]) for r in range(3) for ev in CPU_STEP]
    events += [(r, "cpu", "ProfilerStep#1", 0, 1_000_000 * (r + 1)) for r in range(3)]
    df = table(events)
    assert len(P.plot_breakdown(df, max_ranks=3).fig.axes[0].patches) == 6 * len(
        A.step_breakdown(df)
    )  # a bar per rank and step, as below the default threshold
    parts = P.plot_breakdown(df, max_ranks=2)
    bd = A.step_breakdown(df)
    wall = parts.table.query("part == 'wall'").set_index("step")
    assert wall["max_ms"].tolist() == (bd.groupby("step")["wall_ns"].max() / 1e6).tolist()
    assert wall["ranks"].tolist() == [3] * len(wall)
    heat = P.plot_rank_heatmap(A.rank_steps(df, value="wall"), max_ranks=2)
    assert heat.fig.axes[0].get_images() == []
    assert heat.table.loc[1, ["min_ms", "median_ms", "max_ms"]].tolist() == [1.0, 2.0, 3.0]
    busy = P.plot_rank_heatmap(df, max_ranks=2).table  # the default: time before waiting
    exposed = bd.groupby("step")["exposed_comm_ns"].max() / 1e6
    assert busy.loc[1, "max_ms"] == 3.0 - exposed.loc[1]
    assert heat.table.loc[1, "worst_ranks"] == (2, 1, 0)
    assert heat.table.attrs["slowest_ranks"][0] == 2
