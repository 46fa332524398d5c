"""Self-check helpers for the notebooks' exercises: one module per notebook (``nb01`` ...).

A checker prints a hint on a wrong answer and congratulates on a right one, and returns the
verdict so nbval and tests can assert it.
"""

from __future__ import annotations


def feedback(ok: bool, *, hint: str, well_done: str = "Correct - well done!") -> bool:
    """Print the verdict for a learner and return it.

    >>> feedback(False, hint="Count the warmup step too.")
    Not yet. Hint: Count the warmup step too.
    False
    """
    print(well_done if ok else f"Not yet. Hint: {hint}")
    return ok
