"""Notebook 08 exercise: which share of a step is communication, per dtype and rank count?"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprof_kit.exercises import feedback

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def _comm_share(table: pd.DataFrame, dtype: str, world_size: int) -> float:
    """Communication / step time of one configuration, from ``timing.compute_vs_comm`` (the
    check's truth, private; instructors: ``hpcprof_kit.validate.answers.comm_share``)."""
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

    >>> check_comm_share(None, None)  # doctest: +NORMALIZE_WHITESPACE
    Not yet. Hint: Keep the float32 rows with world_size 2; communication is the all_gather and
    reduce_scatter ops. Their mean time per step (over ranks and iterations) divided by the
    mean 'step' time is the share (a fraction, not %).
    False
    """
    hint = (
        f"Keep the {dtype} rows with world_size {world_size}; communication is the all_gather "
        "and reduce_scatter ops. Their mean time per step (over ranks and iterations) divided by "
        "the mean 'step' time is the share (a fraction, not %)."
    )
    if answer is None or table is None:
        return feedback(False, hint=hint)
    right = _comm_share(table, dtype, world_size)
    ok = abs(float(answer) - right) <= 0.02
    return feedback(
        ok,
        hint=hint,
        well_done=f"Correct - {100 * right:.0f}% of a {dtype} step on {world_size} ranks is "
        + (
            "communication: the step is communication-bound."
            if right > 0.5
            else "communication: compute still takes most of the step."
        ),
    )
