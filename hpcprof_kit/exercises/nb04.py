"""Notebook 04 exercise: which ProfilerStep numbers does a schedule put into its second trace?"""

from __future__ import annotations

from hpcprof_kit.exercises import feedback

# The exercise's schedule (shown in the notebook).
EXERCISE = {"wait": 2, "warmup": 1, "active": 3, "repeat": 2, "skip_first": 1, "steps": 16}


def steps_in_trace(trace: int, **schedule: int) -> list[int]:
    """The loop steps (ProfilerStep#N numbers) that land in trace ``trace`` (0-based).

    >>> steps_in_trace(1, **EXERCISE)
    [10, 11, 12]
    """
    from hpcprof_kit.profiling import schedule_steps

    return [r["step"] for r in schedule_steps(**schedule) if r["trace"] == trace]


def check_second_trace(answer: list[int] | None) -> bool:
    """Check the learner's list of ProfilerStep numbers in the second trace of ``EXERCISE``.

    >>> check_second_trace([7, 8, 9])
    Not yet. Hint: skip_first comes once; then each cycle is wait + warmup + active = 6 steps. Count from step 0.
    False
    """
    right = steps_in_trace(1, **EXERCISE)
    return feedback(
        sorted(answer or []) == right,
        hint="skip_first comes once; then each cycle is wait + warmup + active = 6 steps. Count from step 0.",
        well_done=f"Correct - the second trace holds ProfilerStep#{right[0]} to #{right[-1]}.",
    )
