"""The what-if account as a picture: the ms each rank lost in each step (rank-ms), the steps'
own loss on top, with the table behind it."""

from __future__ import annotations

from typing import Any

import numpy as np

from hpcprof_kit.traces.plots.figure import Plot, new_figure
from hpcprof_kit.traces.plots.spread import step_ticks

MAX_RANKS = 32  # above this many ranks a row per rank no longer reads: the steps alone


def lost_grid(acc: Any):
    """The account's cells as ranks x steps of each rank's own lost ms (rank-ms: its lost
    time less its waiting for other ranks, so the rank that made a step slow stands out),
    NaN where a rank has no such step."""
    own = acc.cells.assign(own_lost_ms=acc.cells["lost_ms"] - acc.cells["waiting_for_ranks"])
    return own.pivot(index="rank", columns="step", values="own_lost_ms")


def plot_time_lost(acc: Any, *, max_ranks: int = MAX_RANKS) -> Plot | None:
    """A rank x step heatmap of the ms each rank lost of its own time against the ideal step
    (:func:`lost_grid`; 0: within noise), above it each step's lost wall ms; its table is the ranks x steps grid. Above
    ``max_ranks`` ranks, the steps' bars alone (the table is the steps'). None when the
    account has no steps.

    >>> from hpcprof_kit import traces                            # doctest: +SKIP
    >>> fig, grid = plot_time_lost(traces.report("runs/x").time_lost)  # doctest: +SKIP
    """
    if acc.cells is None or acc.steps is None or acc.steps.empty:
        return None
    steps = acc.steps.set_index("step")
    grid = lost_grid(acc)
    many = grid.shape[0] > max_ranks
    height = 2.4 if many else max(3.0, 0.35 * grid.shape[0] + 2.2)
    fig = new_figure(max(4.5, 0.55 * grid.shape[1] + 2.8), height)
    if many:
        ax = fig.add_subplot()
        ax.bar(np.arange(len(steps)), steps["lost_ms"].to_numpy(), color="#c44e52")
        step_ticks(ax, np.asarray(steps.index))
        ax.set_ylabel("lost (wall ms)")
        ax.set_xlabel("step")
        ax.set_title(f"time lost per step: {acc.lost_ms:.1f} of {acc.actual_ms:.1f} ms "
                     f"({grid.shape[0]} ranks: per rank in the table)", fontsize=9)  # fmt: skip
        return Plot(fig, acc.steps)
    top, ax = fig.subplots(2, 1, height_ratios=[1, 3], sharex=True)
    top.bar(np.arange(len(steps)), steps["lost_ms"].to_numpy(), color="#c44e52")
    top.set_ylabel("step lost\n(wall ms)", fontsize=8)
    top.set_title(f"time lost: {acc.lost_ms:.1f} of {acc.actual_ms:.1f} ms "
                  f"({acc.lost_pct:.0f} %) against the ideal step", fontsize=9)  # fmt: skip
    values = grid.to_numpy(dtype=float)
    image = ax.imshow(values, aspect="auto", cmap="Reds", interpolation="nearest",
                      vmin=0, vmax=max(1e-9, float(np.nanmax(values, initial=0))))  # fmt: skip
    fig.colorbar(image, ax=[top, ax], label="own lost (rank-ms)\nnot waiting for others")
    step_ticks(ax, np.asarray(grid.columns))
    ax.set_yticks(range(grid.shape[0]), [f"rank {r}" for r in grid.index], fontsize=8)
    ax.set_xlabel("step")
    if values.size <= 200:
        for (i, j), v in np.ndenumerate(values):
            if not np.isnan(v) and v >= 0.5:
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=7)
    return Plot(fig, grid)
