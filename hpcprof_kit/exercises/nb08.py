"""Notebook 08 exercise: which share of a step is communication, per dtype and rank count?"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprof_kit.exercises import feedback

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def comm_share(table: pd.DataFrame, dtype: str, world_size: int) -> float:
    """Communication / step time of one configuration, from ``timing.compute_vs_comm``."""
    from hpcprof_kit.errors import SpecError
    from hpcprof_kit.timing import compute_vs_comm

    cvc = compute_vs_comm(table)
    row = cvc[(cvc["dtype"] == dtype) & (cvc["world_size"] == world_size)]
    if row.empty:
        have = sorted(zip(cvc["dtype"].astype(str), cvc["world_size"].astype(int), strict=True))
        raise SpecError(f"dtype={dtype!r}, world_size={world_size} was not run; runs here: {have}")
    return float(row["comm_share"].mean())


def check_comm_share(
    table: pd.DataFrame, answer: float | None, dtype: str = "float32", world_size: int = 2
) -> bool:
    """Check the learner's comm share (a fraction 0..1) of ``dtype`` on ``world_size`` ranks.

    >>> check_comm_share(None, None)
    Not yet. Hint: In compute_vs_comm(t), find the float32 row with world_size 2 and read comm_share (a fraction, not %).
    False
    """
    hint = (
        f"In compute_vs_comm(t), find the {dtype} row with world_size {world_size} and read "
        "comm_share (a fraction, not %)."
    )
    if answer is None or table is None:
        return feedback(False, hint=hint)
    right = comm_share(table, dtype, world_size)
    ok = abs(float(answer) - right) <= 0.02
    return feedback(
        ok,
        hint=hint,
        well_done=f"Correct - {100 * right:.0f}% of a {dtype} step on {world_size} ranks is communication.",
    )
