"""Self-checks of notebook 07 (the affinity exercise).

>>> check_polaris_list("list:24-31:16-23:8-15:0-7")
Correct - every rank sits next to its GPU, no core shared or reserved.
True
>>> check_polaris_list("list:0-7:8-15:16-23:24-31")  # doctest: +ELLIPSIS
Not yet. Hint: rank 0 runs in NUMA domain(s) [0] but drives GPU0, ... GPU0 sits next to the LAST NUMA domain.
False
"""

from __future__ import annotations

from hpcprof_kit.errors import KitError
from hpcprof_kit.exercises import feedback

# What would give the unbound plan away above its check cell (tests/test_exercises_hidden.py):
# the plans' findings, the comparison's verdict column, or a cell that prints them.
HIDDEN = {
    "check_polaris_list": {
        "text": [r"list:24-31:16-23:8-15:0-7"],
        "code": ['plan_for("polaris", 4, "auto")', "plan_for('polaris', 4, 'auto')"],
        "answer": "polaris_answer",
    },
    "check_unbound_plan": {
        "text": [r"unbound: rank \d", r"\s+unbound\s+\d"],
        "code": ["side_by_side", "exp.comparison", "plan_for(system"],
    },
}


def polaris_answer() -> str:
    """The 4-rank Polaris list with rank i next to GPU i (the answer key's; the kit's own plan,
    ``plan_for("polaris", 4, "auto")``, adds each core's hyperthread to it).

    >>> polaris_answer()
    'list:24-31:16-23:8-15:0-7'
    >>> check_polaris_list(polaris_answer())
    Correct - every rank sits next to its GPU, no core shared or reserved.
    True
    """
    return "list:24-31:16-23:8-15:0-7"


def check_polaris_list(cpu_bind: str) -> bool:
    """Is ``cpu_bind`` a 4-rank Polaris list the checks accept (rank i next to GPU i)?"""
    from hpcprof_kit.affinity import plan_for

    try:
        plan = plan_for("polaris", 4, cpu_bind)
    except KitError as exc:
        return feedback(False, hint=f"the list does not parse: {exc}")
    first = plan.findings[0].message if plan.findings else ""
    return feedback(
        not plan.findings,
        hint=f"{first}. Remember: GPU0 sits next to the LAST NUMA domain.",
        well_done="Correct - every rank sits next to its GPU, no core shared or reserved.",
    )


def check_unbound_plan(answer: str, experiment) -> bool:
    """Which plan's ranks did the comparison flag as unbound? Checked against the experiment."""
    flagged = sorted(
        name
        for name in experiment.plans
        if (experiment.comparison(name)["verdict"] == "unbound").any()
    )
    return feedback(
        [str(answer).strip()] == flagged,
        hint="look at the 'verdict' column of the side-by-side table: which plan lets a rank "
        "run on every CPU of the machine?",
        well_done=f"Correct - under '{', '.join(flagged)}' each rank may run on every CPU, so the "
        "OS can move it mid-step.",
    )
