"""Notebook 04 exercise: which ProfilerStep numbers does a schedule put into its second trace?"""

from __future__ import annotations

from hpcprof_kit.exercises import feedback

# The exercise's schedule (shown in the notebook).
EXERCISE = {"wait": 2, "warmup": 1, "active": 3, "repeat": 2, "skip_first": 1, "steps": 16}

# The schedule of the learner's my_train.py (its %%writefile cell says the same).
MY_SCHEDULE = {"wait": 2, "warmup": 1, "active": 2, "repeat": 1, "steps": 6}


def _steps_in_trace(trace: int, **schedule: int) -> list[int]:
    """The loop steps (ProfilerStep#N numbers) that land in trace ``trace`` (0-based): the
    check's truth, private (the notebook's answers are in :mod:`hpcprof_kit.validate.answers`).

    >>> _steps_in_trace(1, wait=1, warmup=1, active=1, repeat=2, steps=8)
    [5]
    """
    from hpcprof_kit.profiling import schedule_steps

    return [r["step"] for r in schedule_steps(**schedule) if r["trace"] == trace]


def check_second_trace(answer: list[int] | None) -> bool:
    """Check the learner's list of ProfilerStep numbers in the second trace of ``EXERCISE``.

    >>> check_second_trace([7, 8, 9])
    Not yet. Hint: skip_first comes once; then each cycle is wait + warmup + active = 6 steps. Count from step 0.
    False
    """
    right = _steps_in_trace(1, **EXERCISE)
    return feedback(
        sorted(answer or []) == right,
        hint="skip_first comes once; then each cycle is wait + warmup + active = 6 steps. Count from step 0.",
        well_done=f"Correct - the second trace holds ProfilerStep#{right[0]} to #{right[-1]}.",
    )


def check_my_trace(answer: list[int] | None, run_dir) -> bool:
    """Check the learner's prediction against the ProfilerStep numbers their own job's traces
    hold (every rank's ``traces/my_train-*.json`` must hold the same steps).

    >>> import json, tempfile, pathlib
    >>> run = pathlib.Path(tempfile.mkdtemp()); (run / "traces").mkdir()
    >>> span = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 1, "dur": 1}
    >>> _ = (run / "traces" / "my_train-0-of-1.json").write_text(json.dumps({"traceEvents": [span]}))
    >>> check_my_trace([2], run)
    Correct - every rank's trace holds ProfilerStep [2].
    True
    """
    from pathlib import Path

    from hpcprof_kit.profiling import recorded_steps

    files = sorted((Path(run_dir) / "traces").glob("my_train-*.json"))
    if not files:
        print(
            f"No traces/my_train-*.json in {run_dir}: did the job complete (wait_for(mine))? "
            "Did the script reach export_chrome_trace?"
        )
        return False
    found = {f.name: recorded_steps(f) for f in files}
    steps = sorted({tuple(s) for s in found.values()})
    if len(steps) != 1:
        print(f"The ranks recorded different steps: {found}")
        return False
    right = list(steps[0])
    return feedback(
        sorted(answer or []) == right,
        hint="wait=2 steps with the profiler off, then warmup=1 step whose events are thrown "
        "away; active=2 steps follow; count prof.step() calls from 0.",
        well_done=f"Correct - every rank's trace holds ProfilerStep {right}.",
    )


# The repeating schedule of the on_trace_ready exercise (its cell types the same numbers):
# three cycles, each a trace of its own, over exactly as many steps as they take.
CYCLES = {"wait": 1, "warmup": 1, "active": 2, "repeat": 3, "steps": 12}


def _cycles(numbers: list[int]) -> str:
    """The cycle numbers in words.

    >>> _cycles([1, 2])
    'cycles 1 and 2'
    """
    words = [str(n) for n in numbers]
    return ("cycle " if len(words) == 1 else "cycles ") + " and ".join(
        [", ".join(words[:-1]), words[-1]] if len(words) > 1 else words
    )


def check_every_cycle_kept(folder) -> bool:
    """Check that the learner's ``on_trace_ready`` kept a trace of every cycle of ``CYCLES``
    in ``folder``: each cycle's ProfilerStep numbers are in a file of their own (a handler that
    writes one name every time keeps the last cycle only).

    >>> import tempfile
    >>> check_every_cycle_kept(tempfile.mkdtemp())  # doctest: +ELLIPSIS
    Not yet. Hint: no trace in ... torch calls on_trace_ready once per cycle; did the cell run?
    False
    """
    from pathlib import Path

    from hpcprof_kit.profiling import recorded_steps

    folder = Path(folder)
    files = sorted([*folder.glob("*.json"), *folder.glob("*.json.gz")])
    if not files:
        return feedback(False, hint=f"no trace in {folder}: torch calls on_trace_ready once per "
                        "cycle; did the cell run?")  # fmt: skip
    kept = {tuple(recorded_steps(f)) for f in files}
    cycles = [tuple(_steps_in_trace(k, **CYCLES)) for k in range(CYCLES["repeat"])]
    lost = [k + 1 for k, steps in enumerate(cycles) if steps not in kept]
    return feedback(
        not lost,
        hint=f"{len(files)} file(s) in {folder.name}/ hold {CYCLES['repeat'] - len(lost)} of the "
        f"{CYCLES['repeat']} cycles ({_cycles(lost)} lost). torch calls "
        "on_trace_ready once per cycle: a file name that is the same on every call keeps only "
        "the last; make it differ per call (the profiler knows which step it is at), or let "
        "torch's own handler for a directory name the files.",
        well_done="Correct - every cycle has its trace: "
        + ", ".join(f"ProfilerStep{list(s)}" for s in cycles)
        + ".",
    )
