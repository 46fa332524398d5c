"""Pictures of many ranks: the spread across ranks as boxes, and the slowest ranks by name.

At 768 ranks (64 Aurora nodes x 12) one heatmap row or one bar per rank is a smear. These
pictures draw, per step or per part, one box over all ranks: the box spans p10 to p90, the
whisker min to max, the tick is the median; and they name the slowest ranks, the ones to put
on a timeline (:func:`hpcprof_kit.traces.analyses.rank_pick.pick_ranks`). Each returns the
table it draws (:mod:`hpcprof_kit.traces.analyses.spread`), one row per step or part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.analyses.rank_pick import rank_grid, steps_table
from hpcprof_kit.traces.analyses.spread import (
    QUANTILES,
    WORST,
    breakdown_of,
    check_count,
    part_spread,
    step_part_spread,
    step_spread,
)
from hpcprof_kit.traces.plots.figure import COLORS, PART_LABELS, Plot, new_figure

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

WALL_COLOR = "#555555"

BOX_NOTE = "box p10-p90, whisker min-max, tick median"

OTHER_LABELS = {"wall": "wall (the whole step)", "busy": "busy (wall - exposed comm)"}


def _names(ranks, means=None) -> str:
    if means is None:
        return ", ".join(str(r) for r in ranks)
    return "\n".join(f"rank {r}: {m:.2f} ms" for r, m in zip(ranks, means, strict=True))


def draw_boxes(ax, at, q: dict, color: str, horizontal: bool = False, width: float = 0.6):
    """One box per position ``at``; three artists in all, however many positions."""
    at = np.asarray(at, dtype=float)
    lo, hi, mid = q["p10"], q["p90"], q["median"]
    if horizontal:
        ax.barh(at, hi - lo, left=lo, height=width, color=color, alpha=0.6, edgecolor=color)
        ax.hlines(at, q["min"], q["max"], color=color, lw=1)
        ax.vlines(mid, at - width / 2, at + width / 2, color="k", lw=1.5)
    else:
        ax.bar(at, hi - lo, bottom=lo, width=width, color=color, alpha=0.6, edgecolor=color)
        ax.vlines(at, q["min"], q["max"], color=color, lw=1)
        ax.hlines(mid, at - width / 2, at + width / 2, color="k", lw=1.5)


def step_ticks(ax, steps: np.ndarray) -> None:
    every = max(1, int(np.ceil(steps.size / 12)))  # about a dozen labels, however many steps
    at = np.arange(0, steps.size, every)
    ax.set_xticks(at, [str(s) for s in steps[at]], fontsize=8)


def plot_step_bands(data: pd.DataFrame, worst: int = WORST) -> Plot:
    """Step time across ranks, one box per step, with the ``worst`` slowest ranks (by mean
    step time) drawn as lines; the table is :func:`step_spread`.

    >>> from hpcprof_kit import traces                                   # doctest: +SKIP
    >>> fig, steps = traces.plot_rank_heatmap(traces.rank_steps(df))  # 768 ranks  # doctest: +SKIP
    >>> steps[["median_ms", "max_ms", "worst_ranks"]]               # doctest: +SKIP
    """
    worst = check_count("worst", worst)
    steps = steps_table(data)
    table = step_spread(steps, worst)
    ranks, grid = rank_grid(steps)
    x = np.arange(len(table))
    fig = new_figure(max(5.0, 0.35 * len(table) + 3.5), 3.6)
    ax = fig.add_subplot()
    q = {k: table[f"{k}_ms"].to_numpy() for k in QUANTILES}
    draw_boxes(ax, x, q, COLORS["cpu"])
    column = {int(r): i for i, r in enumerate(ranks)}
    for r, m in zip(table.attrs["slowest_ranks"], table.attrs["slowest_mean_ms"], strict=True):
        ax.plot(x, grid[:, column[r]], marker=".", lw=0.8, label=f"rank {r} ({m:.2f} ms/step)")
    step_ticks(ax, np.asarray(table.index))
    ax.set_xlabel("step")
    ax.set_ylabel("step time (ms)")
    ax.set_title(f"step time across {len(ranks):,} ranks: {BOX_NOTE}", fontsize=9)
    ax.legend(
        title=f"the {len(table.attrs['slowest_ranks'])} slowest ranks",
        fontsize=7,
        title_fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1, 1),
    )
    return Plot(fig, table)


def plot_breakdown_bands(data: pd.DataFrame, worst: int = WORST) -> Plot:
    """The step breakdown across ranks: one panel per part (and the wall time), one box per
    step; the last panel names the ``worst`` slowest ranks. The table is
    :func:`step_part_spread`.

    >>> from hpcprof_kit import traces                                   # doctest: +SKIP
    >>> fig, parts = traces.plot_breakdown(traces.step_breakdown(df))  # 768 ranks  # doctest: +SKIP
    >>> parts.query("part == 'exposed_comm'")                          # doctest: +SKIP
    """

    worst = check_count("worst", worst)
    b = breakdown_of(data)
    table = step_part_spread(b, worst)
    steps = np.unique(table["step"].to_numpy())
    fig = new_figure(min(16.0, max(10.0, 0.6 * steps.size + 6)), 5.6)
    axes = fig.subplots(2, 4, sharex=True).ravel()
    for ax, (part, rows) in zip(axes, table.groupby("part", sort=False), strict=False):
        q = {k: rows[f"{k}_ms"].to_numpy() for k in QUANTILES}
        draw_boxes(ax, np.arange(steps.size), q, COLORS.get(part, WALL_COLOR))
        ax.set_title(PART_LABELS.get(part, "wall (the whole step)"), fontsize=8)
        ax.tick_params(labelsize=7)
        step_ticks(ax, steps)
    axes[0].set_ylabel("ms")
    axes[4].set_ylabel("ms")
    axes[-1].axis("off")
    names = _names(table.attrs["slowest_ranks"], table.attrs["slowest_mean_ms"])
    axes[-1].text(0, 1, f"slowest ranks (mean step):\n{names}", va="top", fontsize=8)
    n = int(b["rank"].nunique())
    fig.suptitle(f"step breakdown across {n:,} ranks, per step: {BOX_NOTE}", fontsize=9)
    fig.supxlabel("step", fontsize=8)
    return Plot(fig, table)


def plot_breakdown_spread(data: pd.DataFrame, worst: int = WORST) -> Plot:
    """Per part of the step breakdown: its spread across ranks (each rank's mean per step),
    one box per part, with the ``worst`` ranks where that part is largest named beside it.

    ``data`` is a trace table or a ``step_breakdown`` result. A wide box on *exposed comm*
    says some ranks wait much longer than others: put the named ones on a timeline.

    >>> from hpcprof_kit import traces                                   # doctest: +SKIP
    >>> fig, parts = traces.plot_breakdown_spread(traces.load("runs/x/traces"))  # doctest: +SKIP
    >>> parts.set_index("part").loc["exposed_comm", "worst_ranks"]     # doctest: +SKIP
    """

    worst = check_count("worst", worst)
    table = part_spread(breakdown_of(data), worst)
    y = np.arange(len(table))
    fig = new_figure(7.5, 3.8)
    ax = fig.add_subplot()
    q = {k: table[f"{k}_ms"].to_numpy() for k in QUANTILES}
    colors = [COLORS.get(p, WALL_COLOR) for p in table["part"]]
    draw_boxes(ax, y, q, colors, horizontal=True)
    right = float(np.nanmax(q["max"], initial=0.0)) or 1.0
    for i, (named, tied) in enumerate(zip(table["worst_ranks"], table["tied_ranks"], strict=True)):
        if tied > 1:  # one label per part, not per rank
            label = "equal on every rank" if tied == table["ranks"].iloc[i] else f"{tied} ranks tie"
        else:
            label = f"largest on ranks {_names(named)}"
        ax.text(right * 1.02, i, label, va="center", fontsize=7)
    ax.set_xlim(0, right * 1.6)
    labels = [PART_LABELS.get(p, OTHER_LABELS.get(p, p)) for p in table["part"]]
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ms per step (each rank's mean over its steps)")
    n = int(table["ranks"].iloc[0])
    ax.set_title(f"where step time goes across {n:,} ranks: {BOX_NOTE}", fontsize=9)
    return Plot(fig, table)
