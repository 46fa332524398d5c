"""Pictures of a trace table, each with the table it draws (its "table twin").

Every function returns a ``Plot(fig, table)``: unpack it (``fig, table = plot_...(df)``) or let
a notebook show it (the picture, then the table). Figures are plain ``matplotlib.figure.Figure``
objects (no pyplot state), so they render headless (Agg) and never pile up in memory.
The timeline lives in :mod:`hpcprof_kit.traces.plots.timeline` and is re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.analyses import breakdown as bd
from hpcprof_kit.traces.analyses.ops import same_name
from hpcprof_kit.traces.analyses.spread import check_count
from hpcprof_kit.traces.plots.figure import COLORS, PART_LABELS, Plot, new_figure
from hpcprof_kit.traces.plots.spread import (
    plot_breakdown_bands,
    plot_step_bands,
    step_ticks,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

MAX_RANKS = 32  # above this many ranks, a row or bar per rank no longer reads: draw the spread


def _breakdown_table(data: pd.DataFrame) -> pd.DataFrame:
    return data if "idle_ns" in data.columns else bd.step_breakdown(data)


def plot_breakdown(data: pd.DataFrame, *, max_ranks: int = MAX_RANKS) -> Plot:
    """Stacked bars per rank and step: compute, hidden comm, exposed comm, memory, host, idle (ms).

    ``data`` is a trace table or a ``step_breakdown`` result. Compute comes first: time when
    compute and communication run together is *hidden comm*, communication alone is *exposed
    comm* (what the step waited for); the legend says so part by part. Above ``max_ranks``
    ranks the picture is the spread across ranks instead, one panel per part and one box per
    step, with the slowest ranks named (:func:`hpcprof_kit.traces.plots.spread.plot_breakdown_bands`;
    its table has one row per part and step).

    >>> from hpcprof_kit import traces                                   # doctest: +SKIP
    >>> fig, ms = traces.plot_breakdown(traces.load("runs/x/traces"))    # doctest: +SKIP
    """
    max_ranks = check_count("max_ranks", max_ranks)
    b = _breakdown_table(data)
    if b["rank"].nunique() > max_ranks:
        return plot_breakdown_bands(b)
    table = b[["rank", "step"]].copy()
    for part in bd.PARTS:
        table[f"{part}_ms"] = b[f"{part}_ns"] / 1e6
    table["wall_ms"] = b["wall_ns"] / 1e6
    fig = new_figure(max(4.0, 0.45 * len(table) + 2), 3.6)
    ax = fig.add_subplot()
    x = np.arange(len(table))
    bottom = np.zeros(len(table))
    for part in bd.PARTS:
        values = table[f"{part}_ms"].to_numpy()
        ax.bar(x, values, bottom=bottom, color=COLORS[part], label=PART_LABELS[part])
        bottom += values
    ax.set_xticks(
        x,
        [f"r{r} #{s}" for r, s in zip(table["rank"], table["step"], strict=True)],
        rotation=60,
        fontsize=8,
    )
    ax.set_ylabel("ms")
    ax.set_title(
        "step breakdown, compute first: comm under compute is hidden, comm alone is exposed\n"
        "(parts add up to the step's wall time)",
        fontsize=9,
    )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    return Plot(fig, table)


VALUE_LABELS = {
    "busy": "time worked before waiting (ms)",
    "wall": "step wall time (ms)",
    "wait": "time waiting for communication (ms)",
}


def plot_rank_heatmap(data: pd.DataFrame, *, max_ranks: int = MAX_RANKS) -> Plot:
    """Rank x step heatmap of :func:`~hpcprof_kit.traces.analyses.breakdown.rank_steps` (by default the
    time each rank worked before it waited for communication); each step's straggler is
    framed, and a step whose slowest ranks tie frames none. The table is ``rank_steps``.

    Above ``max_ranks`` ranks it draws one box per step across the ranks, and the slowest
    ranks as lines, instead of a row per rank
    (:func:`hpcprof_kit.traces.plots.spread.plot_step_bands`; its table has one row per step).

    >>> from hpcprof_kit import traces                                      # doctest: +SKIP
    >>> fig, steps = traces.plot_rank_heatmap(traces.load("runs/x/traces")) # doctest: +SKIP
    """
    from matplotlib.patches import Rectangle

    max_ranks = check_count("max_ranks", max_ranks)
    table = data if "straggler" in data.columns else bd.rank_steps(data)
    ranks = [c for c in table.columns if c not in bd.SUMMARY_COLUMNS]
    if len(ranks) > max_ranks:
        return plot_step_bands(table)
    value = table.attrs.get("value", "busy")
    grid = table[ranks].to_numpy(dtype=float).T  # rows = ranks
    fig = new_figure(max(4.0, 0.6 * grid.shape[1] + 2.5), max(2.2, 0.4 * grid.shape[0] + 1.2))
    ax = fig.add_subplot()
    image = ax.imshow(grid, aspect="auto", cmap="viridis", interpolation="nearest")
    fig.colorbar(image, ax=ax, label=VALUE_LABELS.get(value, value))
    step_ticks(ax, np.asarray(table.index))  # about a dozen labels, however many steps
    ax.set_yticks(range(grid.shape[0]), [f"rank {r}" for r in ranks], fontsize=8)
    ax.set_xlabel("step")
    row_of = {r: i for i, r in enumerate(ranks)}
    for j, r in enumerate(table["straggler"].to_numpy()):
        if r in row_of:
            box = Rectangle((j - 0.5, row_of[r] - 0.5), 1, 1, fill=False, ec="red", lw=1.5)
            ax.add_patch(box)
    if grid.size <= 200:  # numbers on the cells while they stay readable
        for (i, j), v in np.ndenumerate(grid):
            if not np.isnan(v):
                ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=7, color="w")
    named = [int(r) for r in table["straggler"] if r >= 0]
    if named:
        top = max(sorted(set(named)), key=named.count)
        note = f"straggler (framed): rank {top} in {named.count(top)} of {len(table)} steps"
    else:
        note = "no straggler: the slowest ranks tie in every step"
    ax.set_title(f"{VALUE_LABELS.get(value, value)} per rank; {note}", fontsize=9)
    return Plot(fig, table)


def plot_same_name(df: pd.DataFrame, name: str, bins: int = 30) -> Plot:
    """Distribution of the durations of every slice called ``name``, one histogram per rank.

    >>> from hpcprof_kit import traces                                        # doctest: +SKIP
    >>> fig, stats = traces.plot_same_name(traces.load("runs/x/traces"), "aten::mm")  # doctest: +SKIP
    """
    table = same_name(df, name)
    occ = table.attrs["occurrences"]
    fig = new_figure(6.0, 3.2)
    ax = fig.add_subplot()
    us = occ["dur_ns"].to_numpy(dtype=float) / 1e3
    edges = np.histogram_bin_edges(us, bins=bins)
    for rank, group in occ.groupby("rank"):
        ax.hist(group["dur_ns"] / 1e3, bins=edges, histtype="step", label=f"rank {rank}")
    ax.axvline(table.loc["all", "median_us"], color="k", ls="--", lw=0.8, label="median")
    ax.set_xlabel("duration (µs)")
    ax.set_ylabel("occurrences")
    ax.set_title(f"{name}: {len(occ)} occurrences", fontsize=9)
    ax.legend(fontsize=8)
    return Plot(fig, table)
