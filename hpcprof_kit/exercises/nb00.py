"""Notebook 00 (quickstart): predict which loop steps a profiler schedule records, then check
the prediction against the trace of your own run.

The answer is read from the run's traces (the ``ProfilerStep#N`` spans every rank wrote), so
the check holds whatever schedule the notebook's parameters set; without a run it falls back
to the schedule itself.

>>> check_recorded_steps([2], wait=2, warmup=1, active=1, repeat=1)
Not yet. Hint: Step 2 is a warm-up step: the profiler runs but throws the events away.
False

The answer for the notebook's own parameters is in the instructors' key
(:mod:`hpcprof_kit.validate.answers`), which no notebook imports.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from hpcprof_kit.exercises import feedback

_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def _recorded_steps(wait: int, warmup: int, active: int, repeat: int, steps: int = 6) -> list[int]:
    """The loop steps whose events land in a trace under this schedule (the check's truth:
    private, so that no name a notebook imports gives it)."""
    from hpcprof_kit.profiling import schedule_steps

    rows = schedule_steps(wait=wait, warmup=warmup, active=active, repeat=repeat, steps=steps)
    return [r["step"] for r in rows if r["trace"] is not None]


def _run_dir(run) -> Path:
    return Path(run.run_dir if hasattr(run, "run_dir") else os.fspath(run))


def _steps_in_run(run) -> dict[int, list[int]]:
    """Rank -> the ``ProfilerStep`` numbers its trace holds, for a job or a run directory.

    Raises ``TraceFormatError`` (from ``traces.load``) when the run wrote no trace.
    """
    from hpcprof_kit import traces

    df = traces.load(_run_dir(run) / "traces")
    found: dict[int, set[int]] = {}
    for rank, name in df.loc[df["name"].astype(str).str.startswith("ProfilerStep#"),
                             ["rank", "name"]].itertuples(index=False):  # fmt: skip
        match = _STEP.match(str(name))
        if match:
            found.setdefault(int(rank), set()).add(int(match.group(1)))
    return {rank: sorted(steps) for rank, steps in sorted(found.items())}


def _hint(answer: list[int], right: list[int], wait: int, warmup: int, active: int) -> str:
    if not answer:
        return "Give the step numbers as a list, e.g. [4, 5]; loop steps count from 0."
    early = [s for s in answer if s < wait + warmup]
    if any(s < wait for s in early):
        waits = "Step 0 is a 'wait' step" if wait == 1 else f"Steps 0-{wait - 1} are 'wait' steps"
        return f"{waits}: the profiler is off."
    if early:
        return f"Step {early[0]} is a warm-up step: the profiler runs but throws the events away."
    if len(answer) != len(right):
        return f"active={active}: that many steps are recorded in each cycle; count them."
    return "Count wait, then warmup, then active steps from step 0."


def _run_steps(run) -> tuple[list[int] | None, str]:
    """The steps the run's traces hold (all ranks), or None and why the check cannot use it."""
    from hpcprof_kit.errors import TraceFormatError

    state = getattr(run, "state", "COMPLETED")
    if state != "COMPLETED":
        return None, f"job {run.job_id} is {state}: wait_for(job) says why; check again after"
    try:
        per_rank = _steps_in_run(run)
    except TraceFormatError as exc:
        return None, f"the run wrote no trace ({exc}); was it submitted with profile=True?"
    if not per_rank:
        return None, "the run's traces hold no ProfilerStep spans: prof.step() was never called"
    return sorted({s for steps in per_rank.values() for s in steps}), ""


def check_recorded_steps(
    answer: Iterable[int] | None,
    run=None,
    *,
    wait: int = 1,
    warmup: int = 1,
    active: int = 2,
    repeat: int = 1,
    steps: int = 6,
) -> bool:
    """Check the learner's list of recorded loop steps: against the traces of ``run`` (a job
    or a run directory) when given, else against the schedule."""
    expected = _recorded_steps(wait, warmup, active, repeat, steps)
    right, source = expected, "the trace"
    if run is not None:
        found, why = _run_steps(run)
        if found is None:
            print(f"Cannot check against your run yet: {why}.")
            return False
        right, source = found, "your run's trace"
    try:
        given = sorted(int(s) for s in (answer or []))
    except (TypeError, ValueError):
        given = []
    shown = " and #".join(str(s) for s in right)
    agree = "" if right == expected else (
        f" (the schedule alone predicts {expected}: the run ended before the cycle did)"
    )  # fmt: skip
    return feedback(
        given == right,
        hint=_hint(given, right, wait, warmup, active),
        well_done=(
            f"Correct - well done! With wait={wait}, warmup={warmup}, active={active} "
            f"{source} holds ProfilerStep#{shown}.{agree}"
        ),
    )
