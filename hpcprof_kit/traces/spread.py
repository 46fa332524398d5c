"""Pictures of many ranks: the spread across ranks as boxes, and the slowest ranks by name.

At 768 ranks (64 Aurora nodes x 12) one heatmap row or one bar per rank is a smear. These
pictures draw, per step or per part, one box over all ranks: the box spans p10 to p90, the
whisker min to max, the tick is the median; and they name the slowest ranks, the ones to put
on a timeline (:func:`hpcprof_kit.traces.rank_pick.pick_ranks`). Their tables hold the same
numbers, one row per step or part, so what is drawn can be checked. The work is whole-array
numpy over a steps x ranks grid: no Python loop runs over the ranks.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.errors import SpecError, TraceFormatError
from hpcprof_kit.traces.breakdown import PARTS, step_breakdown
from hpcprof_kit.traces.figure import COLORS, PART_LABELS, Plot, new_figure
from hpcprof_kit.traces.rank_pick import by_mean, rank_grid, steps_table

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

QUANTILES = {"min": 0.0, "p10": 0.1, "median": 0.5, "p90": 0.9, "max": 1.0}
WORST = 5  # slowest ranks named on a picture
WALL_COLOR = "#555555"
BOX_NOTE = "box p10-p90, whisker min-max, tick median"
OTHER_LABELS = {"wall": "wall (the whole step)", "busy": "busy (wall - exposed comm)"}


def check_count(name: str, value) -> int:
    """``value`` when it is a positive int, else a SpecError naming the keyword."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise SpecError(f"{name}={value!r} is not a count of ranks; pass {name}=1 or more")
    return int(value)


def quantiles(values: np.ndarray, axis: int = -1) -> dict[str, np.ndarray]:
    """min / p10 / median / p90 / max of ``values`` along ``axis``, NaN (a missing step) left
    out; numpy's default (linear) quantiles."""
    qs = list(QUANTILES.values())
    with warnings.catch_warnings():  # a row without any value gives NaN, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        nan = np.isnan(values).any()
        q = np.nanquantile(values, qs, axis=axis) if nan else np.quantile(values, qs, axis=axis)
    return dict(zip(QUANTILES, q, strict=True))


def largest(grid: np.ndarray, ranks: np.ndarray, k: int = WORST) -> list[tuple[int, ...]]:
    """Per row of ``grid`` (rows x ranks): the ``k`` ranks of largest value, largest first
    (ties: the lower rank first; NaN never named).

    >>> largest(np.array([[1.0, 3.0, 2.0]]), np.array([10, 11, 12]), k=2)
    [(11, 12)]
    """
    order = np.argsort(-np.where(np.isnan(grid), -np.inf, grid), axis=1, kind="stable")[:, :k]
    named = np.take_along_axis(~np.isnan(grid), order, axis=1)
    return [tuple(int(r) for r in row[ok]) for row, ok in zip(ranks[order], named, strict=True)]


def breakdown_cube(b: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ranks, steps, cube)`` of a ``step_breakdown`` table: ``cube[i, s, r]`` is part ``i``
    (``PARTS``, then the wall time) of step ``steps[s]`` on rank ``ranks[r]``, in ms."""
    ranks, r_at = np.unique(b["rank"].to_numpy(dtype=np.int64), return_inverse=True)
    steps, s_at = np.unique(b["step"].to_numpy(dtype=np.int64), return_inverse=True)
    columns = [f"{p}_ns" for p in PARTS] + ["wall_ns"]
    cube = np.full((len(columns), steps.size, ranks.size), np.nan)
    cube[:, s_at, r_at] = b[columns].to_numpy(dtype=float).T / 1e6
    return ranks, steps, cube


def _breakdown(data: pd.DataFrame) -> pd.DataFrame:
    b = data if "idle_ns" in data.columns else step_breakdown(data)
    if b.empty:
        raise TraceFormatError(
            "the breakdown has no steps, so there is no spread across ranks to draw; "
            "check the trace with traces.step_breakdown(df)"
        )
    return b


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


def step_spread(steps: pd.DataFrame, worst: int = WORST) -> pd.DataFrame:
    """One row per step of a ``rank_steps`` table: how many ranks ran it, the quantiles of its
    time across them (ms), the straggler and spread, and its ``worst`` slowest ranks;
    ``attrs["slowest_ranks"]`` names the slowest ranks by mean step time."""
    ranks, grid = rank_grid(steps)
    out = steps[[]].copy()
    out["ranks"] = (~np.isnan(grid)).sum(axis=1)
    for name, values in quantiles(grid, axis=1).items():
        out[f"{name}_ms"] = values
    for column in ("spread_ms", "spread_pct", "straggler"):
        out[column] = steps[column]
    out["worst_ranks"] = largest(grid, ranks, worst)
    by_rank, mean = by_mean(ranks, grid)
    keep = ~np.isnan(mean)
    out.attrs["slowest_ranks"] = [int(r) for r in by_rank[keep][::-1][:worst]]
    out.attrs["slowest_mean_ms"] = [float(m) for m in mean[keep][::-1][:worst]]
    return out


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


def step_part_spread(b: pd.DataFrame, worst: int = WORST) -> pd.DataFrame:
    """One row per part (``PARTS``, then ``wall``) and step of a ``step_breakdown`` table:
    how many ranks ran the step, the quantiles and mean of the part across them (ms), and
    the ``worst`` ranks where the part took longest; ``attrs["slowest_ranks"]`` names the
    slowest ranks by mean step time."""
    import pandas as pd

    ranks, steps, cube = breakdown_cube(b)
    parts = [*PARTS, "wall"]
    out = pd.DataFrame(
        {
            "part": np.repeat(parts, steps.size),
            "step": np.tile(steps, len(parts)),
            "ranks": (~np.isnan(cube)).sum(axis=2).ravel(),
        }
    )
    for name, values in quantiles(cube, axis=2).items():
        out[f"{name}_ms"] = values.ravel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out["mean_ms"] = np.nanmean(cube, axis=2).ravel()
    out["worst_ranks"] = largest(cube.reshape(-1, ranks.size), ranks, worst)
    by_rank, mean = by_mean(ranks, cube[-1])
    out.attrs["slowest_ranks"] = [int(r) for r in by_rank[::-1][:worst]]
    out.attrs["slowest_mean_ms"] = [float(m) for m in mean[::-1][:worst]]
    return out


def plot_breakdown_bands(data: pd.DataFrame, worst: int = WORST) -> Plot:
    """The step breakdown across ranks: one panel per part (and the wall time), one box per
    step; the last panel names the ``worst`` slowest ranks. The table is
    :func:`step_part_spread`.

    >>> from hpcprof_kit import traces                                   # doctest: +SKIP
    >>> fig, parts = traces.plot_breakdown(traces.step_breakdown(df))  # 768 ranks  # doctest: +SKIP
    >>> parts.query("part == 'exposed_comm'")                          # doctest: +SKIP
    """

    worst = check_count("worst", worst)
    b = _breakdown(data)
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


def part_spread(b: pd.DataFrame, worst: int = WORST) -> pd.DataFrame:
    """One row per part (``PARTS``, then ``wall``, then ``busy``: wall - exposed comm, the
    time a rank worked before it waited): each rank's mean per step (ms) of it, summarised
    across ranks (quantiles), the ``worst`` ranks where it is largest, and ``tied_ranks``:
    how many ranks are within 1 % of the largest (at least 10 µs), so that a part equal on
    every rank is not read as "largest on ranks 0, 1, 2". In synchronous training the wall
    ties on every rank; the straggler is the rank largest on ``busy``."""
    import pandas as pd

    from hpcprof_kit.traces.breakdown import TIE_MIN_NS, TIE_SHARE

    ranks, _, cube = breakdown_cube(b)
    busy = cube[-1] - cube[PARTS.index("exposed_comm")]
    cube = np.concatenate([cube, busy[None]], axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        per_rank = np.nanmean(cube, axis=1)  # parts x ranks
    out = pd.DataFrame({"part": [*PARTS, "wall", "busy"], "ranks": ranks.size})
    for name, values in quantiles(per_rank, axis=1).items():
        out[f"{name}_ms"] = values
    out["worst_ranks"] = largest(per_rank, ranks, worst)
    margin = np.maximum(TIE_SHARE * out["median_ms"].to_numpy(), TIE_MIN_NS / 1e6)
    top = np.nan_to_num(out["max_ms"].to_numpy(), nan=np.inf)
    out["tied_ranks"] = (per_rank >= (top - margin)[:, None]).sum(axis=1)
    return out


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
    table = part_spread(_breakdown(data), worst)
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
