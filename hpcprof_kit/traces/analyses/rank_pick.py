"""Which ranks to look at: at 1,000 ranks, draw the slowest, a typical and the fastest one.

A rank's score is its mean over the steps it ran of the ``rank_steps`` value (by default the
time it worked before waiting for communication, which is what a straggler has most of), so
one slow step does not hide a rank that is slow every step. The pictures of many ranks
(:mod:`hpcprof_kit.traces.analyses.spread`) name the ranks this module picks.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.errors import SpecError
from hpcprof_kit.traces.analyses.breakdown import SUMMARY_COLUMNS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

HOW = ("worst", "median", "best")


def steps_table(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` as a ``rank_steps`` table (step x rank, ms), computed when it is a trace table."""
    from hpcprof_kit.traces.analyses.breakdown import rank_steps

    return data if "straggler" in data.columns else rank_steps(data)


def rank_grid(steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The rank ids and the step x rank grid of step times (ms, NaN where a rank lacks a step)
    of a ``rank_steps`` table.

    >>> import pandas as pd
    >>> steps = pd.DataFrame({0: [1.0, 2.0], 1: [3.0, 4.0], "straggler": [1, 1]})
    >>> ranks, grid = rank_grid(steps)
    >>> ranks.tolist(), grid.shape
    ([0, 1], (2, 2))
    """
    ranks = [c for c in steps.columns if c not in SUMMARY_COLUMNS]
    return np.asarray(ranks, dtype=np.int64), steps[ranks].to_numpy(dtype=float)


def rank_scores(steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Rank ids and their mean step time (ms), fastest first (ties: the lower rank first)."""
    return by_mean(*rank_grid(steps))


def by_mean(ranks: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``ranks`` and the mean of their column of ``grid`` (steps x ranks), smallest first."""
    with warnings.catch_warnings():  # a rank without any step scores NaN and sorts last
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(grid, axis=0) if grid.size else np.full(ranks.size, np.nan)
    order = np.argsort(mean, kind="stable")
    return ranks[order], mean[order]


def pick_ranks(steps: pd.DataFrame, how: str | tuple[str, ...] = HOW, *, n: int = 1) -> list[int]:
    """Rank ids to draw on a timeline: the ``n`` slowest (``"worst"``), the ``n`` around the
    median (``"median"``) and the ``n`` fastest (``"best"``) by mean step time, in the order
    of ``how``, each rank once.

    ``steps`` is a ``rank_steps`` table (or a trace table, whose ``rank_steps`` is computed).

    >>> import pandas as pd
    >>> steps = pd.DataFrame({0: [20.0, 21.0], 1: [30.0, 29.0], 2: [25.0, 24.0], "straggler": 1})
    >>> pick_ranks(steps), pick_ranks(steps, "worst", n=2)
    ([1, 2, 0], [1, 2])

    >>> from hpcprof_kit import traces                                  # doctest: +SKIP
    >>> df = traces.load("runs/x/traces")                               # doctest: +SKIP
    >>> ranks = traces.pick_ranks(traces.rank_steps(df))                # doctest: +SKIP
    >>> traces.plot_timeline(df, ranks=ranks, step=3)                   # doctest: +SKIP
    """
    how = (how,) if isinstance(how, str) else tuple(how)
    unknown = [h for h in how if h not in HOW]
    if unknown:
        raise SpecError(f"how={unknown[0]!r} is not a way to pick ranks; pick from {HOW}")
    if not isinstance(n, int) or n < 1:
        raise SpecError(f"n={n!r} ranks per pick is not a count; pass n=1 or more")
    ranks, mean = rank_scores(steps_table(steps))
    ranks = ranks[~np.isnan(mean)]  # ranks without a step have nothing to show
    if ranks.size == 0:
        raise SpecError("the steps table has no rank with a step time; nothing to pick from")
    middle = max(0, min((ranks.size - 1) // 2 - (n - 1) // 2, ranks.size - n))
    chosen = {
        "worst": ranks[::-1][:n],
        "median": ranks[middle : middle + n],
        "best": ranks[:n],
    }
    picked = [int(r) for h in how for r in chosen[h]]
    return list(dict.fromkeys(picked))
