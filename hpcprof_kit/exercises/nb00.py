"""Notebook 00 (quickstart): which loop steps does a profiler schedule record?

>>> check_recorded_steps([2, 3], wait=1, warmup=1, active=2, repeat=1)
Correct - well done! With wait=1, warmup=1, active=2 the trace holds ProfilerStep#2 and #3.
True
>>> check_recorded_steps([1, 2, 3], wait=1, warmup=1, active=2, repeat=1)
Not yet. Hint: Step 1 is a warm-up step: the profiler runs but throws the events away.
False
"""

from __future__ import annotations

from collections.abc import Iterable

from hpcprof_kit.exercises import feedback


def recorded_steps(wait: int, warmup: int, active: int, repeat: int, steps: int = 6) -> list[int]:
    """The loop steps whose events land in a trace under this schedule."""
    from hpcprof_kit.profiling import schedule_steps

    rows = schedule_steps(wait=wait, warmup=warmup, active=active, repeat=repeat, steps=steps)
    return [r["step"] for r in rows if r["trace"] is not None]


def _hint(answer: list[int], right: list[int], wait: int, warmup: int, active: int) -> str:
    if not answer:
        return "Give the step numbers as a list, e.g. [4, 5]; the step table's index shows them."
    early = [s for s in answer if s < wait + warmup]
    if any(s < wait for s in early):
        waits = "Step 0 is a 'wait' step" if wait == 1 else f"Steps 0-{wait - 1} are 'wait' steps"
        return f"{waits}: the profiler is off."
    if early:
        return f"Step {early[0]} is a warm-up step: the profiler runs but throws the events away."
    if len(answer) != len(right):
        return f"active={active}: that many steps are recorded in each cycle; count them."
    return "Count wait, then warmup, then active steps from step 0."


def check_recorded_steps(
    answer: Iterable[int] | None,
    *,
    wait: int = 1,
    warmup: int = 1,
    active: int = 2,
    repeat: int = 1,
    steps: int = 6,
) -> bool:
    """Check the learner's list of recorded ProfilerStep numbers against the schedule."""
    right = recorded_steps(wait, warmup, active, repeat, steps)
    try:
        given = sorted(int(s) for s in (answer or []))
    except (TypeError, ValueError):
        given = []
    shown = " and #".join(str(s) for s in right)
    return feedback(
        given == right,
        hint=_hint(given, right, wait, warmup, active),
        well_done=(
            f"Correct - well done! With wait={wait}, warmup={warmup}, active={active} "
            f"the trace holds ProfilerStep#{shown}."
        ),
    )
