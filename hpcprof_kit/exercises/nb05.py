"""Notebook 05 exercise: how long does rank 0 wait for communication per step, on average?"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprof_kit.exercises import feedback

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

HINT = (
    "Take step_breakdown(df), keep rank 0's rows, average exposed_comm_ns (communication "
    "while no compute runs) and divide by 1e6 for ms."
)


def exposed_comm_ms_per_step(df: pd.DataFrame, rank: int = 0) -> float:
    """Mean exposed communication per step (ms) of one rank, from ``step_breakdown``.

    >>> from hpcprof_kit import traces                                    # doctest: +SKIP
    >>> exposed_comm_ms_per_step(traces.load("runs/x"), rank=0)           # doctest: +SKIP
    0.42
    """
    from hpcprof_kit.traces.analyses import step_breakdown

    bd = step_breakdown(df)
    return float(bd.loc[bd["rank"] == rank, "exposed_comm_ns"].mean() / 1e6)


def check_exposed_comm_ms(df: pd.DataFrame, answer: float | None, rank: int = 0) -> bool:
    """Check the learner's mean exposed comm ms per step of ``rank`` (within 5 %).

    >>> check_exposed_comm_ms(None, None)
    Not yet. Hint: Take step_breakdown(df), keep rank 0's rows, average exposed_comm_ns (communication while no compute runs) and divide by 1e6 for ms.
    False
    """
    if answer is None or df is None:
        return feedback(False, hint=HINT)
    right = exposed_comm_ms_per_step(df, rank)
    ok = abs(float(answer) - right) <= 0.05 * right + 1e-6
    return feedback(
        ok,
        hint=HINT,
        well_done=f"Correct - rank {rank} waits {right:.2f} ms per step for communication "
        "that no compute hides.",
    )
