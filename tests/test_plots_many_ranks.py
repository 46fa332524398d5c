"""Plots at 1,000 ranks: boxes across ranks instead of a row or bar per rank, the slowest ranks
named, numbers that match numpy's quantiles, and the ranks picked for a timeline."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpcprof_kit import traces
from hpcprof_kit.errors import SpecError
from hpcprof_kit.traces.analyses.breakdown import PARTS, rank_steps
from hpcprof_kit.traces.analyses.rank_pick import pick_ranks
from hpcprof_kit.traces.plots import charts as P
from hpcprof_kit.traces.plots.spread import plot_breakdown_spread

FIXTURE = Path(__file__).parent / "fixtures" / "traces" / "ddp_cpu_2rank"
Q = [0.0, 0.1, 0.5, 0.9, 1.0]
QCOLS = ["min_ms", "p10_ms", "median_ms", "p90_ms", "max_ms"]
# planted stragglers: rank -> extra ms on every step, slowest first
SLOW = {517: 16.0, 3: 13.0, 1000: 10.0, 64: 7.0, 900: 4.0}  # spaced wider than the noise


def step_times(ranks: int = 1024, steps: int = 20, seed: int = 0) -> np.ndarray:
    """steps x ranks step times (ms): ~20 ms with noise, the SLOW ranks slower every step."""
    rng = np.random.default_rng(seed)
    ms = rng.uniform(19.0, 21.0, size=(steps, ranks))
    for rank, extra in SLOW.items():
        if rank < ranks:
            ms[:, rank] += extra
    return ms


def trace_of(ms: np.ndarray) -> pd.DataFrame:
    """The ProfilerStep rows of a trace table whose step ``s`` on rank ``r`` lasts ``ms[s, r]``."""
    steps, ranks = ms.shape
    dur = np.round(ms * 1e6).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(dur.max(axis=1))[:-1]])
    return pd.DataFrame(
        {
            "rank": np.tile(np.arange(ranks), steps),
            "track": pd.Categorical(["cpu"] * dur.size),
            "name": pd.Categorical(
                [f"ProfilerStep#{s}" for s in range(steps) for _ in range(ranks)]
            ),
            "ts_ns": np.repeat(start, ranks),
            "dur_ns": dur.ravel(),
            "cat": pd.Categorical(["user_annotation"] * dur.size),
            "pid": pd.Categorical(["1"] * dur.size),
            "tid": pd.Categorical(["1"] * dur.size),
            "device": -1,
        }
    )


def breakdown_of(ranks: int = 1024, steps: int = 20, seed: int = 1) -> pd.DataFrame:
    """A step_breakdown-shaped table; the SLOW ranks wait (exposed comm) for their extra time."""
    rng = np.random.default_rng(seed)
    b = pd.DataFrame(
        {"rank": np.repeat(np.arange(ranks), steps), "step": np.tile(np.arange(steps), ranks)}
    )
    for part in PARTS:
        b[f"{part}_ns"] = rng.integers(1_000_000, 3_000_000, size=len(b))
    for rank, extra in SLOW.items():
        b.loc[b["rank"] == rank, "exposed_comm_ns"] += int(extra * 1e6)
    b["wall_ns"] = b[[f"{p}_ns" for p in PARTS]].sum(axis=1)
    return b


def artists(fig) -> int:
    return sum(
        len(ax.patches) + len(ax.lines) + len(ax.collections) + len(ax.texts) + len(ax.images)
        for ax in fig.axes
    )


@pytest.fixture(scope="module")
def steps_1024() -> tuple[np.ndarray, pd.DataFrame]:
    ms = step_times()
    return ms, rank_steps(trace_of(ms))


def test_heatmap_of_1024_ranks_draws_a_box_per_step_with_numpy_quantiles(steps_1024):
    ms, steps = steps_1024
    plot = P.plot_rank_heatmap(steps)
    table = plot.table
    assert len(table) == 20 and table["ranks"].tolist() == [1024] * 20
    grid = np.round(ms * 1e6) / 1e6  # what the trace holds: whole ns
    expected = np.quantile(grid, Q, axis=1).T
    np.testing.assert_allclose(table[QCOLS].to_numpy(), expected, rtol=1e-12)
    assert table["worst_ranks"].tolist() == [tuple(SLOW)] * 20
    assert table["straggler"].tolist() == [517] * 20
    assert table.attrs["slowest_ranks"] == list(SLOW)
    np.testing.assert_allclose(table.attrs["slowest_mean_ms"], grid[:, list(SLOW)].mean(axis=0))
    ax = plot.fig.axes[0]
    assert ax.get_images() == [] and len(ax.patches) == 20  # one box per step, no rank rows
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert [t.split(" (")[0] for t in legend] == [f"rank {r}" for r in SLOW]
    assert "1,024 ranks" in ax.get_title()


def test_many_rank_pictures_draw_as_many_artists_at_64_as_at_1024_ranks(steps_1024):
    small = rank_steps(trace_of(step_times(ranks=64)))
    assert artists(P.plot_rank_heatmap(small).fig) == artists(
        P.plot_rank_heatmap(steps_1024[1]).fig
    )
    b_small, b_big = breakdown_of(ranks=64), breakdown_of()
    for plot in (P.plot_breakdown, plot_breakdown_spread):
        n = artists(plot(b_big).fig)
        assert n == artists(plot(b_small).fig) and n < 250


def test_a_missing_step_is_left_out_of_its_quantiles():
    ms = step_times(ranks=40, steps=3)
    ms[1, 7] = np.nan  # rank 7 did not export step 1
    trace = trace_of(np.nan_to_num(ms, nan=1.0))
    trace = trace[~((trace["rank"] == 7) & (trace["name"] == "ProfilerStep#1"))]
    table = P.plot_rank_heatmap(rank_steps(trace)).table
    assert table["ranks"].tolist() == [40, 39, 40]
    grid = np.round(ms * 1e6) / 1e6
    np.testing.assert_allclose(table[QCOLS].to_numpy(), np.nanquantile(grid, Q, axis=1).T)


def test_heatmap_keeps_a_row_per_rank_up_to_max_ranks():
    steps = rank_steps(trace_of(step_times(ranks=32, steps=4)))
    assert P.plot_rank_heatmap(steps).fig.axes[0].get_images()[0].get_array().shape == (32, 4)
    boxes = P.plot_rank_heatmap(steps, max_ranks=31)
    assert boxes.fig.axes[0].get_images() == [] and "median_ms" in boxes.table
    wide = P.plot_rank_heatmap(rank_steps(trace_of(step_times(ranks=40, steps=2))), max_ranks=64)
    assert wide.fig.axes[0].get_images()[0].get_array().shape == (40, 2)


def test_a_heatmap_of_500_steps_stays_a_page_wide_with_a_dozen_step_labels():
    # found at 256 ranks x 542 steps: the figure grew 0.6 inch per step (327 inches, 190 MB)
    plot = P.plot_rank_heatmap(rank_steps(trace_of(step_times(ranks=2, steps=500))))
    width, _ = plot.fig.get_size_inches()
    assert width <= 16.0
    labels = [t.get_text() for t in plot.fig.axes[0].get_xticklabels()]
    assert 10 <= len(labels) <= 13 and labels[:2] == ["0", "42"]
    assert plot.fig.axes[0].get_images()[0].get_array().shape == (2, 500)  # every cell kept


def test_breakdown_of_1024_ranks_has_one_row_per_part_and_step():
    b = breakdown_of()
    plot = P.plot_breakdown(b)
    table = plot.table
    assert len(table) == 7 * 20
    assert table["part"].unique().tolist() == [*PARTS, "wall"]
    for part in ("exposed_comm", "wall"):
        grid = b.pivot(index="step", columns="rank", values=f"{part}_ns").to_numpy() / 1e6
        rows = table[table["part"] == part]
        np.testing.assert_allclose(rows[QCOLS].to_numpy(), np.quantile(grid, Q, axis=1).T)
        np.testing.assert_allclose(rows["mean_ms"], grid.mean(axis=1))
    exposed = table[table["part"] == "exposed_comm"]
    assert exposed["worst_ranks"].tolist() == [tuple(SLOW)] * 20
    assert table.attrs["slowest_ranks"] == list(SLOW)
    panels = plot.fig.axes
    assert len(panels) == 8 and [len(ax.patches) for ax in panels[:7]] == [20] * 7
    assert panels[2].get_title() == "exposed comm (no compute)"
    named = panels[-1].texts[0].get_text()
    assert named.startswith("slowest ranks") and "rank 517:" in named


def test_breakdown_spread_boxes_each_ranks_mean_per_step():
    b = breakdown_of()
    plot = plot_breakdown_spread(b)
    table = plot.table.set_index("part")
    assert table.index.tolist() == [*PARTS, "wall", "busy"] and (table["ranks"] == 1024).all()
    b["busy_ns"] = b["wall_ns"] - b["exposed_comm_ns"]
    per_rank = b.groupby("rank")[[f"{p}_ns" for p in PARTS] + ["wall_ns", "busy_ns"]].mean() / 1e6
    expected = np.quantile(per_rank.to_numpy(), Q, axis=0).T
    np.testing.assert_allclose(table[QCOLS].to_numpy(), expected)
    assert table.loc["exposed_comm", "worst_ranks"] == tuple(SLOW)
    assert table.loc["wall", "worst_ranks"] == tuple(SLOW)
    texts = [t.get_text() for t in plot.fig.axes[0].texts]
    assert len(texts) == 8 and texts[2] == "largest on ranks 517, 3, 1000, 64, 900"
    assert len(plot.fig.axes[0].patches) == 8
    # the planted ranks wait for their extra time: they are the others' victims, not the
    # straggler, so they are not the ranks that worked longest
    assert not set(table.loc["busy", "worst_ranks"]) & set(SLOW)


@pytest.fixture(scope="module")
def ddp():
    return traces.load(FIXTURE)


def test_breakdown_spread_and_pick_ranks_on_a_real_two_rank_trace(ddp):
    plot = traces.plot_breakdown_spread(ddp)
    wall = plot.table.set_index("part").loc["wall"]
    per_rank = traces.step_breakdown(ddp).groupby("rank")["wall_ns"].mean() / 1e6
    assert (wall["min_ms"], wall["max_ms"]) == pytest.approx((per_rank.min(), per_rank.max()))
    # rank 1's steps are longer (25.3 ms against 22.8), but it waits 16.7 ms of them in the
    # all-reduce; rank 0 works 14.1 ms before waiting, rank 1 8.5: rank 0 is the straggler
    steps = traces.rank_steps(ddp)
    assert steps["straggler"].tolist() == [0] * len(steps)
    assert traces.pick_ranks(steps) == [0, 1]  # worst, then median and best (both rank 1)
    assert traces.pick_ranks(ddp, "best") == [1]
    timeline = traces.plot_timeline(ddp, ranks=traces.pick_ranks(steps, "worst"), step=3)
    assert set(timeline.table["rank"]) == {0}


def test_pick_ranks_finds_the_planted_stragglers(steps_1024):
    ms, steps = steps_1024
    mean = (np.round(ms * 1e6) / 1e6).mean(axis=0)
    order = np.argsort(mean, kind="stable")
    assert pick_ranks(steps, "worst", n=5) == list(SLOW)
    assert pick_ranks(steps) == [517, int(order[511]), int(order[0])]
    assert pick_ranks(steps, ("best", "median"), n=2) == [*order[:2], *order[511:513]]
    assert (
        pick_ranks(steps, "worst", n=5) == P.plot_rank_heatmap(steps).table.attrs["slowest_ranks"]
    )


def test_many_rank_arguments_are_checked():
    steps = rank_steps(trace_of(step_times(ranks=3, steps=2)))
    with pytest.raises(SpecError, match="how='slowest'"):
        pick_ranks(steps, ("worst", "slowest"))
    with pytest.raises(SpecError, match="n=0"):
        pick_ranks(steps, n=0)
    with pytest.raises(SpecError, match="max_ranks=0"):
        P.plot_rank_heatmap(steps, max_ranks=0)
    with pytest.raises(SpecError, match="max_ranks='8'"):
        P.plot_breakdown(breakdown_of(ranks=3, steps=2), max_ranks="8")
    with pytest.raises(SpecError, match="worst=0"):
        plot_breakdown_spread(breakdown_of(ranks=3, steps=2), worst=0)
