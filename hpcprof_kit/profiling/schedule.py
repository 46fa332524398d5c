"""Profiler schedules, explained: which steps a ``torch.profiler.schedule`` records, and into which trace.

The rules mirror ``torch.profiler.schedule`` exactly (a property test checks it against torch):
steps below ``skip_first`` are idle; then each cycle of ``wait + warmup + active`` steps is
*wait* (idle), *warmup* (profiler on, results dropped) and *active* (recorded); the last active
step of a cycle is *record_and_save*, after which the trace is handed to ``on_trace_ready``.
``repeat=0`` repeats the cycle until the loop ends. Step ``n`` is the loop iteration that runs
between the ``n``-th and the ``n+1``-th ``prof.step()`` call and shows up as ``ProfilerStep#n``.

>>> [row["state"] for row in schedule_steps(wait=1, warmup=1, active=2, repeat=1, steps=5)]
['idle', 'warmup', 'record', 'record_and_save', 'idle']
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import ScheduleError

# The four states, in the learner's words, and torch's ProfilerAction names for them.
STATES = ("idle", "warmup", "record", "record_and_save")
TORCH_ACTION_OF = {
    "idle": "NONE",
    "warmup": "WARMUP",
    "record": "RECORD",
    "record_and_save": "RECORD_AND_SAVE",
}
# Colours of the strip drawn by plot_schedule (one per state).
STATE_COLOURS = {
    "idle": "#d9d9d9",
    "warmup": "#f6c85f",
    "record": "#6f9fd8",
    "record_and_save": "#2f5d9e",
}


@dataclass(frozen=True)
class Schedule:
    """A profiler schedule's five numbers (same meaning as ``torch.profiler.schedule``).

    >>> Schedule(wait=1, warmup=1, active=2, repeat=1).state(3)
    'record_and_save'
    """

    wait: int = 1
    warmup: int = 1
    active: int = 2
    repeat: int = 1
    skip_first: int = 0

    def __post_init__(self) -> None:
        for name in ("wait", "warmup", "active", "repeat", "skip_first"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ScheduleError(
                    f"schedule field {name}={value!r} is not a whole number; pass an int such as {name}=1"
                )
            if value < 0:
                raise ScheduleError(
                    f"schedule field {name}={value} is negative; the limit is {name} >= 0 "
                    f"(use {name}=0 to leave it out)"
                )
        if self.active == 0:
            raise ScheduleError(
                "schedule field active=0 records nothing; the limit is active >= 1 "
                "(use active=1 or more: the number of steps each trace holds)"
            )

    @property
    def cycle_length(self) -> int:
        return self.wait + self.warmup + self.active

    def state(self, step: int) -> str:
        """The state of loop step ``step`` (0-based), as torch's schedule function decides it."""
        if step < 0:
            raise ScheduleError(f"step={step} is negative; steps count from 0")
        if step < self.skip_first:
            return "idle"
        step -= self.skip_first
        if self.repeat > 0 and step >= self.repeat * self.cycle_length:
            return "idle"
        mod = step % self.cycle_length
        if mod < self.wait:
            return "idle"
        if mod < self.wait + self.warmup:
            return "warmup"
        return "record" if mod < self.cycle_length - 1 else "record_and_save"

    def torch_schedule(self):
        """The equivalent ``torch.profiler.schedule`` callable (imports torch)."""
        import torch.profiler

        return torch.profiler.schedule(**asdict(self))

    def first_recorded_step(self) -> int:
        """The first step that lands in a trace."""
        return self.skip_first + self.wait + self.warmup


FIELDS = ("wait", "warmup", "active", "repeat", "skip_first")


def from_torch(fn: Any) -> Schedule | None:
    """The Schedule a ``torch.profiler.schedule(...)`` callable was made with; None for any
    other callable (or one using ``skip_first_wait``, which Schedule does not model).

    >>> import torch.profiler
    >>> from_torch(torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2))
    Schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=0)
    >>> from_torch(lambda step: None) is None
    True
    """
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
    if code is None or getattr(fn, "__qualname__", "") != "schedule.<locals>.schedule_fn":
        return None
    try:
        values = {
            name: cell.cell_contents for name, cell in zip(code.co_freevars, cells, strict=True)
        }
    except ValueError:  # an empty cell, or cells that do not match the names
        return None
    if not set(FIELDS) <= set(values) or values.get("skip_first_wait", 0):
        return None
    return Schedule(**{k: values[k] for k in FIELDS})


def as_schedule(value: Schedule | dict[str, int] | None) -> Schedule:
    """Accept a Schedule, a dict of its fields, a ``torch.profiler.schedule(...)`` callable,
    or None (the default 1/1/2 x1)."""
    if value is None:
        return Schedule()
    if isinstance(value, Schedule):
        return value
    if callable(value) and from_torch(value) is not None:
        return from_torch(value)
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(FIELDS))
        if unknown:
            raise ScheduleError(
                f"schedule field(s) {unknown} are unknown; use wait, warmup, active, repeat, skip_first"
            )
        return Schedule(**value)
    raise ScheduleError(
        f"schedule={value!r} is neither a Schedule, a dict nor torch.profiler.schedule(...); "
        "pass Schedule(wait=1, warmup=1, active=2)"
    )


def schedule_steps(
    wait: int = 1,
    warmup: int = 1,
    active: int = 2,
    repeat: int = 1,
    skip_first: int = 0,
    steps: int = 8,
) -> list[dict[str, Any]]:
    """Each loop step's state and the trace it ends up in, as a list of dicts (no pandas needed).

    ``trace`` is the 0-based index of the trace a recorded step is saved into (None when the step
    is not recorded); ``profiler_step`` is the ``ProfilerStep#N`` name it carries in that trace.
    A cycle cut short by the end of the loop is still saved when the profiler stops.

    >>> rows = schedule_steps(wait=0, warmup=1, active=1, repeat=2, steps=4)
    >>> [(r["step"], r["state"], r["trace"]) for r in rows]
    [(0, 'warmup', None), (1, 'record_and_save', 0), (2, 'warmup', None), (3, 'record_and_save', 1)]
    """
    sched = Schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
    if not isinstance(steps, int) or steps < 1:
        raise ScheduleError(f"steps={steps!r} must be a whole number >= 1: the loop's length")
    rows: list[dict[str, Any]] = []
    trace = 0
    for step in range(steps):
        state = sched.state(step)
        recorded = state in ("record", "record_and_save")
        rows.append(
            {
                "step": step,
                "state": state,
                "trace": trace if recorded else None,
                "profiler_step": f"ProfilerStep#{step}" if recorded else "",
            }
        )
        if state == "record_and_save":
            trace += 1
    if not any(r["trace"] is not None for r in rows):
        first = sched.first_recorded_step()
        raise ScheduleError(
            f"this schedule records nothing within steps={steps}: the first recorded step is "
            f"{first} (skip_first={skip_first} + wait={wait} + warmup={warmup}); "
            f"run at least steps={first + active} or shorten skip_first/wait/warmup"
        )
    return rows


def schedule_table(
    wait: int = 1,
    warmup: int = 1,
    active: int = 2,
    repeat: int = 1,
    skip_first: int = 0,
    steps: int = 8,
):
    """The schedule as a DataFrame: one row per step with ``state``, ``trace``, ``profiler_step``.

    >>> schedule_table(wait=1, warmup=1, active=2, repeat=1, steps=5)["state"].tolist()
    ['idle', 'warmup', 'record', 'record_and_save', 'idle']
    """
    import pandas as pd

    rows = schedule_steps(wait, warmup, active, repeat, skip_first, steps)
    table = pd.DataFrame(rows).set_index("step")
    table["trace"] = table["trace"].astype("Int64")
    return table


def format_schedule(rows: list[dict[str, Any]]) -> str:
    """A plain-text table of ``schedule_steps`` rows (what ``hpcprof-kit schedule`` prints).

    >>> print(format_schedule(schedule_steps(wait=0, warmup=1, active=1, steps=2)))
    step  state            trace  profiler_step
       0  warmup               -
       1  record_and_save      0  ProfilerStep#1
    """
    lines = [f"{'step':>4}  {'state':<15}  {'trace':>5}  profiler_step"]
    for r in rows:
        trace = "-" if r["trace"] is None else str(r["trace"])
        lines.append(f"{r['step']:>4}  {r['state']:<15}  {trace:>5}  {r['profiler_step']}".rstrip())
    return "\n".join(lines)


def plot_schedule(
    wait: int = 1,
    warmup: int = 1,
    active: int = 2,
    repeat: int = 1,
    skip_first: int = 0,
    steps: int = 8,
    ax=None,
):
    """Draw the schedule as a strip of coloured steps; returns ``(fig, table)``.

    >>> fig, table = plot_schedule(wait=1, warmup=1, active=2, steps=6)
    >>> len(table)
    6
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    table = schedule_table(wait, warmup, active, repeat, skip_first, steps)
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * steps + 1.5) + 1.6, 2.2))
    else:
        fig = ax.figure
    for step, row in table.iterrows():
        ax.barh(0, 1, left=step, color=STATE_COLOURS[row["state"]], edgecolor="white")
        if pd_notna(row["trace"]):
            ax.text(
                step + 0.5,
                0,
                f"T{row['trace']}",
                ha="center",
                va="center",
                color="white",
                fontsize=8,
            )
    ax.set_yticks([])
    ax.set_xlim(0, steps)
    ax.set_xticks([s + 0.5 for s in range(steps)], [str(s) for s in range(steps)], fontsize=8)
    ax.set_xlabel("loop step (ProfilerStep#N); Tk = saved in trace k")
    ax.legend(
        handles=[Patch(color=STATE_COLOURS[s], label=s) for s in STATES],
        loc="center left",
        bbox_to_anchor=(1.01, 0.5),  # beside the strip: clear of the axis label and title
        ncol=1,
        fontsize=8,
        frameon=False,
    )
    ax.set_title(
        f"schedule(wait={wait}, warmup={warmup}, active={active}, repeat={repeat}, skip_first={skip_first})",
        fontsize=9,
    )
    fig.tight_layout()
    return fig, table


def pd_notna(value: Any) -> bool:
    import pandas as pd

    return bool(pd.notna(value))


def recorded_steps(trace_path: str | os.PathLike[str]) -> list[int]:
    """The ``ProfilerStep#N`` numbers a trace holds (``.json`` or ``.json.gz``), sorted.

    >>> recorded_steps("traces/trace-0-of-2.json")  # doctest: +SKIP
    [2, 3]
    """
    import gzip
    import json
    import re

    path = Path(trace_path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        events = json.load(fh).get("traceEvents", [])
    found = {
        m.group(1)
        for e in events
        if (m := re.fullmatch(r"ProfilerStep#(\d+)", str(e.get("name", ""))))
    }
    return sorted(int(n) for n in found)
