"""Many ranks summarised: the spread across ranks per step or part, and the slowest ranks by name.

At 768 ranks (64 Aurora nodes x 12) one heatmap row or one bar per rank is a smear. These
pictures draw, per step or per part, one box over all ranks: the box spans p10 to p90, the
whisker min to max, the tick is the median; and they name the slowest ranks, the ones to put
on a timeline (:func:`hpcprof_kit.traces.analyses.rank_pick.pick_ranks`). Their tables hold the same
numbers, one row per step or part, so what is drawn can be checked. The work is whole-array
numpy over a steps x ranks grid: no Python loop runs over the ranks.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.errors import SpecError, TraceFormatError
from hpcprof_kit.traces.analyses.breakdown import PARTS, step_breakdown
from hpcprof_kit.traces.analyses.rank_pick import by_mean, rank_grid

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

QUANTILES = {"min": 0.0, "p10": 0.1, "median": 0.5, "p90": 0.9, "max": 1.0}
WORST = 5  # slowest ranks named on a picture


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


def breakdown_of(data: pd.DataFrame) -> pd.DataFrame:
    b = data if "idle_ns" in data.columns else step_breakdown(data)
    if b.empty:
        raise TraceFormatError(
            "the breakdown has no steps, so there is no spread across ranks to draw; "
            "check the trace with traces.step_breakdown(df)"
        )
    return b


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


def part_spread(b: pd.DataFrame, worst: int = WORST) -> pd.DataFrame:
    """One row per part (``PARTS``, then ``wall``, then ``busy``: wall - exposed comm, the
    time a rank worked before it waited): each rank's mean per step (ms) of it, summarised
    across ranks (quantiles), the ``worst`` ranks where it is largest, and ``tied_ranks``:
    how many ranks are within 1 % of the largest (at least 10 µs), so that a part equal on
    every rank is not read as "largest on ranks 0, 1, 2". In synchronous training the wall
    ties on every rank; the straggler is the rank largest on ``busy``."""
    import pandas as pd

    from hpcprof_kit.traces.analyses.breakdown import TIE_MIN_NS, TIE_SHARE

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
