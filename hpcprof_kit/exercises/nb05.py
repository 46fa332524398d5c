"""Notebook 05 exercise: read your own eager-vs-compiled table and judge the difference.

The learner sees the step times of both runs as a :func:`hpcprof_kit.comparison.compare_variants`
table (median, p10, p90, spread) and answers ``"faster"``, ``"slower"`` or ``"within noise"``
for the compiled run; the answer is checked against the same rule that ``noise_verdict`` applies
to the learner's own numbers.

>>> from hpcprof_kit.comparison import compare_variants
>>> table = compare_variants({"eager": [50, 40, 61, 55], "compiled": [48, 52, 39, 58]})
>>> check_compiled_verdict("faster", table)  # doctest: +ELLIPSIS
Not yet. Hint: Look at the p10 and p90 columns ...
False
>>> check_compiled_verdict("within noise", table)  # doctest: +ELLIPSIS
Correct - compiled vs eager: within noise (median ...
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprof_kit.exercises import feedback

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# What would give the answer away above the check cell (tests/test_exercises_hidden.py): the
# verdict sentence itself, or a cell that computes it.
HIDDEN = {
    "check_compiled_verdict": {
        "text": [r"within noise \(", r"is faster than \w+: median", r"larger than the noise\."],
        "code": ["noise_verdict", "difference"],
    }
}
ANSWERS = ("faster", "slower", "within noise")
HINT = (
    "Look at the p10 and p90 columns of both rows: each p10-p90 range holds the middle 80 % of "
    "that run's steps. If the two ranges overlap, you cannot tell the runs apart; if they are "
    "apart, the run with the lower median is the faster one."
)


def check_compiled_verdict(
    answer: str | None, table: pd.DataFrame, variant: str = "compiled"
) -> bool:
    """Is ``variant`` (against the table's baseline) ``"faster"``, ``"slower"`` or ``"within
    noise"``? Checked against :func:`hpcprof_kit.comparison.difference` on the same table."""
    from hpcprof_kit.comparison import difference, noise_verdict

    given = str(answer).strip().lower() if answer is not None else None
    if given not in ANSWERS:
        return feedback(False, hint=f"answer one of {list(ANSWERS)}. {HINT}")
    right = difference(table, variant)
    sentence = next(s for s in noise_verdict(table).splitlines() if variant in s)
    return feedback(given == right, hint=HINT, well_done=f"Correct - {sentence}")
