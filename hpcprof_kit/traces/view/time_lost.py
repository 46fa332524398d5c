"""The what-if account of a run: how much time each step lost against the run's own ideal step,
and where it went.

The **ideal step** is the run without its anomalies: each part of the step breakdown
(:data:`~hpcprof_kit.traces.analyses.breakdown.PARTS`) at its median over every (rank, step)
cell, except the communication a step waits for, which is the median over steps of the least
any rank waited in the step (the transfer every rank waits for; what a rank waits beyond it
is waiting for the others). A cell's **lost time** is its wall time minus the ideal step's,
split into fixed parts, each from the breakdown part or the signal that measures it:

- ``kernels_slower``: compute ran longer (the same kernels running longer, or more of them);
- ``host_untraced``: host time with no traced op while the device idled (``ProfilerStep#``
  and ``record_function`` ranges are no ops): a GC pause, a file write, a stall;
- ``blocking_copy_sync``: copies nothing overlapped, and the device idle after the host
  waited for it (a sync);
- ``waiting_for_ranks``: communication waited for beyond the transfer (other ranks were
  late); with one rank it cannot be told from a slow transfer and goes to ``unexplained``;
- ``allocation``, ``data_loading``, ``launch_gaps``: the device idle while the host
  allocated, loaded the next batch, or launched tiny kernels one by one;
- ``unexplained``: the rest, so that the parts always add up to the lost time.

A part's deviation counts beyond its noise floor (``NOISE_TIMES`` x its spread over the
cells, the faster half, at least ``FLOOR_SHARE`` of the ideal step); a cell's or a step's
lost time beyond the spread of what the named parts leave of the wall times (so that slow
steps the account explains do not hide each other). Under it, it counts as 0 and is said to be
within noise: a clean run reads "0 ms lost". Per cell the numbers are rank-ms; the run's ``lost_ms`` is wall time: per
step, the step's wall time (the median over its ranks) minus the ideal step's, split as the
cell of the rank the others waited for (the one that worked longest before the collective).
Ideal plus lost equals actual, and the parts equal the lost time, in every cell, every step
and the run, to 0.01 ms. Leading steps that rise towards the steady time (a GPU's queue
filling) and a cut last step are left out; with fewer than ``MIN_STEPS`` steps left there is
no account, and its notes say how many ms were not accounted for.

>>> LOST_PARTS[:3]
('kernels_slower', 'host_untraced', 'blocking_copy_sync')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

LOST_PARTS = (
    "kernels_slower",
    "host_untraced",
    "blocking_copy_sync",
    "waiting_for_ranks",
    "allocation",
    "data_loading",
    "launch_gaps",
    "unexplained",
)
MIN_STEPS = 3  # steps the account needs to tell an ideal step from a slow one
NOISE_TIMES = 3.0  # a deviation counts beyond this many times the spread over cells
FLOOR_SHARE = 0.02  # and beyond this share of the ideal step (jitter a spread cannot see)
# the signals (ns per rank and step) whose excess over their median names the device's idle
SIGNAL_OF = {
    "data_loading": "loader_idle_ns",
    "blocking_copy_sync": "sync_idle_ns",
    "allocation": "alloc_ns",
    "launch_gaps": "launch_idle_ns",
}
_BREAKDOWN = ("compute", "hidden_comm", "exposed_comm", "memory", "host", "idle")


def ramp_length(wall) -> int:
    """Leading steps that rise towards the steady step time: the host filling the device's
    launch queue of a GPU-bound run, its steps measuring the host, not the run (at most half
    the steps).

    >>> ramp_length([35.0, 72.0, 96.0, 97.0, 96.5, 97.2])
    2
    """
    wall = np.asarray(wall, dtype=float)
    if wall.size < 4:
        return 0
    steady = float(np.median(wall[wall.size // 2 :]))
    n = 0
    # below the steady time, rising or not: a GPU run's first steps are often short while the
    # queue fills and the clocks settle (seen on an H100: 17, 13, then 19-22 ms steps)
    while n < wall.size // 2 and wall[n] < 0.9 * steady:
        n += 1
    return n


def _ramp(wall) -> int:
    """:func:`ramp_length`, when every step of the ramp is shorter than every later one: a
    queue filling, not fast steps among slow ones (a run whose slow steps come late)."""
    n = ramp_length(wall)
    wall = np.asarray(wall, dtype=float)
    return n if n and wall[:n].max() < 0.9 * wall[n:].min() else 0


def spread(values: np.ndarray) -> float:
    """The jitter of the faster half: 1.4826 x the MAD of the values at or under the median,
    times 1.7 (the MAD of a normal's lower half is 0.59 of its standard deviation). Slow
    steps or cells, even more than half of them, do not widen it as they widen a MAD.

    >>> round(spread(np.array([10.0, 10.2, 9.8, 10.1, 9.9, 30.0, 31.0, 29.0, 33.0])), 3)
    0.252
    """
    v = np.sort(values[~np.isnan(values)])
    if not v.size:
        return 0.0
    fast = v[: (v.size + 1) // 2]
    return 1.7 * 1.4826 * float(np.median(np.abs(fast - np.median(fast))))


@dataclass
class TimeLost:
    """The account of one run (see the module docstring). ``cells`` (rank-ms) and ``steps``
    (wall ms) are tables with ``actual_ms, ideal_ms, lost_ms, within_noise`` and a column per
    part of :data:`LOST_PARTS`; ``parts`` sums the steps' parts; ``notes`` say what could not
    be accounted for."""

    actual_ms: float = 0.0
    ideal_ms: float = 0.0
    lost_ms: float = 0.0
    ideal_step_ms: float = 0.0
    noise_ms: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    ideal_parts_ms: dict[str, float] = field(default_factory=dict)
    steps: pd.DataFrame | None = None
    cells: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    complete: bool = True

    @property
    def lost_pct(self) -> float:
        return 100.0 * self.lost_ms / self.actual_ms if self.actual_ms > 0 else 0.0

    def step_part(self, part: str, steps) -> float:
        """The run's ``part`` (wall ms) summed over ``steps``."""
        if self.steps is None or self.steps.empty:
            return 0.0
        rows = self.steps[self.steps["step"].isin(list(steps))]
        return float(rows[part].sum())

    def step_lost(self, steps) -> float:
        """Wall ms lost in ``steps``."""
        return self.step_part("lost_ms", steps)

    def to_dict(self) -> dict[str, Any]:
        """What the report's JSON holds under ``time_lost``."""

        def rows(table):
            if table is None:
                return []
            return [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}
                    for r in table.to_dict(orient="records")]  # fmt: skip

        return {
            "actual_ms": round(self.actual_ms, 3),
            "ideal_ms": round(self.ideal_ms, 3),
            "lost_ms": round(self.lost_ms, 3),
            "lost_pct": round(self.lost_pct, 2),
            "ideal_step_ms": round(self.ideal_step_ms, 3),
            "noise_ms": round(self.noise_ms, 3),
            "parts": {k: round(v, 3) for k, v in self.parts.items()},
            "ideal_step_parts_ms": {k: round(v, 3) for k, v in self.ideal_parts_ms.items()},
            "units": "run, steps: wall ms; cells: rank-ms (each rank's own time)",
            "complete": self.complete,
            "notes": list(self.notes),
            "steps": rows(self.steps),
            "cells": rows(self.cells),
        }

    def text(self) -> str:
        """The "Time lost" block of the text report."""
        if self.steps is None or self.steps.empty:
            return "Time lost: not accounted. " + " ".join(self.notes)
        n = len(self.steps)
        head = (
            f"Time lost: {self.actual_ms:.1f} ms over {n} step{'s' * (n != 1)}, of which "
            f"{self.lost_ms:.1f} ms ({self.lost_pct:.0f} %) lost against the ideal step of "
            f"{self.ideal_step_ms:.2f} ms (noise floor {self.noise_ms:.2f} ms)"
        )
        if self.lost_ms <= 0:
            return head + ": every step within noise.\n" + "".join(
                f"  note: {n}\n" for n in self.notes)  # fmt: skip
        parts = ", ".join(f"{k} {v:.1f} ms" for k, v in sorted(
            self.parts.items(), key=lambda kv: -abs(kv[1])) if abs(v) >= 0.05)  # fmt: skip
        lines = [f"{head}: {parts}."]
        lost = self.steps[self.steps["lost_ms"] > 0]
        for row in lost.itertuples(index=False):
            top = max(LOST_PARTS, key=lambda p: getattr(row, p))
            who = ("every rank lost its own time" if row.every_rank
                   else f"rank {row.rank} the others waited for")  # fmt: skip
            lines.append(
                f"  step {row.step}: {row.lost_ms:.1f} ms lost ({who}; mostly {top}, "
                f"{getattr(row, top):.1f} ms on rank {row.rank})"
            )
        within = n - len(lost)
        if within:
            lines.append(f"  {within} step{'s' * (within != 1)} within noise: 0 ms lost")
        if self.cells is not None and len(self.cells["rank"].unique()) > 1:
            own = self.cells["lost_ms"] - self.cells["waiting_for_ranks"]
            top = own.groupby(self.cells["rank"]).sum().sort_values(ascending=False).head(4)
            shown = ", ".join(f"rank {r} {v:.1f}" for r, v in top.items() if v > 0)
            if shown:
                lines.append(f"  per rank, its own time lost, not waiting for others "
                             f"(rank-ms): {shown}")  # fmt: skip
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def account(view: Any) -> TimeLost:
    """The what-if account of the run in ``view``, a
    :class:`~hpcprof_kit.traces.view.run_view.RunView` (which imports this module: hence no
    type here), see the module docstring."""
    import pandas as pd

    out = TimeLost()
    rows = view.rows[view.rows["step"] >= 0]
    if rows.empty:
        whole = float(view.b["wall_ns"].sum()) / 1e6 if len(view.b) else 0.0
        out.complete = False
        out.notes.append(
            "the trace has no ProfilerStep steps, so there is no step to compare with: "
            f"{whole:.1f} ms (rank-ms, the whole trace) not accounted for; record with "
            "torch.profiler.schedule and prof.step()"
        )
        out.steps = out.cells = None
        return out
    for rank, step in sorted(view.truncated):
        out.notes.append(f"rank {rank}'s step {step} was cut by the end of the recording: "
                         "left out of the account")  # fmt: skip
    ramp = {(r, int(st)) for r, steps, wall in view.walls for st in steps[: _ramp(wall)]}
    if ramp:
        keep = [(int(r), int(st)) not in ramp for r, st in zip(rows["rank"], rows["step"],
                                                               strict=True)]  # fmt: skip
        rows = rows[np.asarray(keep, dtype=bool)]
        out.notes.append(
            f"steps {', '.join(str(st) for st in sorted({st for _, st in ramp}))} rise towards "
            "the steady step time (the host filling the device's queue: they measure the host, "
            "not the run): left out of the account"
        )
    if rows["step"].nunique() < MIN_STEPS:
        out.complete = False
        n = rows["step"].nunique()
        out.notes.append(
            f"{n} whole step{'s' * (n != 1)}: too few to tell an ideal step ({MIN_STEPS} "
            f"needed), so {float(rows['wall_ns'].sum()) / 1e6:.1f} ms (rank-ms) are not "
            "accounted for; record more steps (torch.profiler.schedule's active=)"
        )
        out.steps = out.cells = None
        return out
    rank = rows["rank"].to_numpy(dtype=np.int64)
    step = rows["step"].to_numpy(dtype=np.int64)
    wall = rows["wall_ns"].to_numpy(dtype=float) / 1e6
    part = {p: rows[f"{p}_ns"].to_numpy(dtype=float) / 1e6 for p in _BREAKDOWN}
    multi = np.unique(rank).size > 1
    if not multi:
        out.notes.append("one rank: the account runs over its steps, and waiting for other "
                         "ranks cannot be attributed (it goes to unexplained)")  # fmt: skip
    # the transfer every rank waits for: per step, the least any rank waited
    least = pd.Series(part["exposed_comm"]).groupby(step).transform("min").to_numpy()
    ideal = {p: float(np.median(v)) for p, v in part.items()}
    if multi:
        ideal["exposed_comm"] = float(np.median(pd.Series(least).groupby(step).first()))
    ideal_wall = float(sum(ideal.values()))
    a = _attribute(part, _signals(view, rows), ideal, ideal_wall, multi,
                   _floors(part, ideal_wall, rows))  # fmt: skip
    busy = wall - part["exposed_comm"]
    named = sum(a[p] for p in LOST_PARTS[:-1])
    cell_floor = _noise(wall, named, ideal_wall)
    step_floor = cell_floor  # a step is judged by its cells' noise: its ranks' walls may part
    cells = _cells(a, wall, ideal_wall, cell_floor)
    cells.insert(0, "step", step)
    cells.insert(0, "rank", rank)
    out.cells = cells
    out.steps = _steps(cells, busy, ideal_wall, step_floor)
    out.ideal_step_ms = ideal_wall
    out.ideal_parts_ms = ideal
    out.noise_ms = step_floor
    out.actual_ms = float(out.steps["actual_ms"].sum())
    out.lost_ms = float(out.steps["lost_ms"].sum())
    out.ideal_ms = out.actual_ms - out.lost_ms
    out.parts = {p: float(out.steps[p].sum()) for p in LOST_PARTS}
    return out


def _signals(view: Any, rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """The signals of :data:`SIGNAL_OF` per row of ``rows`` (ms; 0 where the run has none)."""
    index = rows.set_index(["rank", "step"]).index
    sig = view.sig.set_index(["rank", "step"]) if len(view.sig) else None
    out = {}
    for part, column in SIGNAL_OF.items():
        if sig is None or column not in sig.columns:
            out[part] = np.zeros(len(rows))
        else:
            out[part] = sig[column].reindex(index).fillna(0).to_numpy(dtype=float) / 1e6
    return out


def _floors(part, ideal_wall, rows) -> dict[str, float]:
    """The noise floor (ms) of each part: 3 x its spread over the cells (the faster half),
    and at least ``FLOOR_SHARE`` of the ideal step."""
    import pandas as pd

    least = FLOOR_SHARE * ideal_wall
    floors = {p: max(NOISE_TIMES * spread(v), least) for p, v in part.items()}
    floors["kernels_slower"] = max(NOISE_TIMES * spread(part["compute"] + part["hidden_comm"]),
                                   least)  # fmt: skip
    # waiting beyond the transfer: against the transfer's own jitter (the least wait of each
    # step), since in a run whose slowest rank changes every step most ranks wait in most
    steps = rows["step"].to_numpy()
    least_wait = pd.Series(part["exposed_comm"]).groupby(steps).min().to_numpy()
    floors["waiting_for_ranks"] = max(NOISE_TIMES * spread(least_wait), least)
    floors["host_untraced"] = floors["idle"]
    floors["blocking_copy_sync"] = floors["memory"]
    return floors


def _attribute(part, sig, ideal, ideal_wall, multi, floor_of) -> dict[str, np.ndarray]:
    """Each cell's deviation from the ideal, part by part (ms), where it is beyond that
    part's floor (0 where not); ``unexplained`` is left to the caller."""
    excess = {p: v - ideal[p] for p, v in part.items()}
    a = {p: np.zeros(next(iter(part.values())).size) for p in LOST_PARTS[:-1]}
    a["kernels_slower"] = excess["compute"] + excess["hidden_comm"]
    if multi:
        a["waiting_for_ranks"] = excess["exposed_comm"]
    # the device's idle beyond the ideal: first what a signal names, then no op at all
    pool = np.maximum(excess["host"], 0) + np.maximum(excess["idle"], 0)
    a["blocking_copy_sync"] = excess["memory"].copy()
    for p in ("data_loading", "blocking_copy_sync", "allocation", "launch_gaps"):
        over = np.maximum(sig[p] - np.median(sig[p]), 0)
        take = np.minimum(over, pool)
        floor = max(NOISE_TIMES * spread(sig[p]), FLOOR_SHARE * ideal_wall)
        take = np.where(take >= floor, take, 0.0)
        a[p] = a[p] + take
        pool = pool - take
    a["host_untraced"] = np.minimum(np.maximum(excess["idle"], 0), pool)
    for p in ("kernels_slower", "waiting_for_ranks", "host_untraced", "blocking_copy_sync"):
        a[p] = np.where(np.abs(a[p]) >= floor_of[p], a[p], 0.0)
    return a


def _cells(a, wall, ideal_wall, floor) -> pd.DataFrame:
    """Each cell's actual, ideal and lost time (rank-ms) and the lost time's parts: lost
    beyond ``floor``, else 0 and within noise."""
    import pandas as pd

    lost = wall - ideal_wall
    beyond = lost > floor
    lost = np.where(beyond, lost, 0.0)
    out = pd.DataFrame({"actual_ms": wall, "ideal_ms": wall - lost, "lost_ms": lost,
                        "within_noise": ~beyond})  # fmt: skip
    for p in LOST_PARTS[:-1]:
        out[p] = np.where(beyond, a[p], 0.0)
    out["unexplained"] = lost - out[list(LOST_PARTS[:-1])].sum(axis=1).to_numpy()
    return out


def _noise(wall, named, ideal_wall) -> float:
    """The noise floor of a cell's and a step's lost time: 3 x the spread (the faster half)
    of what the named parts leave of the cells' wall times, so slow steps and slow ranks the
    account explains do not widen it; at least ``FLOOR_SHARE`` of the ideal step. (Not of the
    steps' own wall times: where a rank's slow step spills into another's next one, its
    ranks' walls part, and their median is no step's.)"""
    return max(NOISE_TIMES * spread(wall - named), FLOOR_SHARE * ideal_wall)


def _steps(cells: pd.DataFrame, busy: np.ndarray, ideal_wall: float, floor: float):
    """Per step (wall ms): the step's wall time (the median of its ranks'), its lost time over
    the ideal step's beyond ``floor``, split as the cell of the rank the others waited for;
    ``every_rank`` when 3 in 4 of its ranks lost their own time alike (a slow step, not one
    slow rank)."""
    import pandas as pd

    c = cells.assign(busy=busy)
    rows = []
    for s, g in c.groupby("step", sort=True):
        critical = g.loc[g["busy"].idxmax()]
        actual = float(g["actual_ms"].median())
        lost = actual - ideal_wall
        beyond = lost > floor
        named = beyond and float(critical["lost_ms"]) > 0  # else the rest is unexplained
        own = g["lost_ms"] - g["waiting_for_ranks"]
        alike = (own > 0) & (own >= 0.5 * float(own.max())) if len(g) > 1 else own > 0
        row = {"step": int(s), "rank": int(critical["rank"]), "actual_ms": actual,
               "every_rank": bool(len(g) > 1 and beyond and alike.mean() >= 0.75)}  # fmt: skip
        parts = {p: float(critical[p]) if named else 0.0 for p in LOST_PARTS[:-1]}
        lost = lost if beyond else 0.0
        parts["unexplained"] = lost - sum(parts.values())
        row.update({"ideal_ms": actual - lost, "lost_ms": lost, "within_noise": not beyond})
        row.update(parts)
        rows.append(row)
    return pd.DataFrame(rows)


def finding_lost(f: dict, acc: TimeLost) -> float | None:
    """A finding's total cost to the run from the account (wall ms), or None where the
    account cannot attribute it: a problem of every step is in the ideal step too."""
    if acc.steps is None or acc.steps.empty:
        return None
    kind, steps, ev = f["kind"], f["steps"], f.get("evidence", {})
    by_step = acc.steps.set_index("step")
    if kind in ("straggler", "rotating_straggler", "slow_steps", "host_stall"):
        costs = ev.get("saved_if_typical_ms_by_step") or ev.get("cost_ms_by_step") or {}
        total = 0.0
        for s in steps:
            if s not in by_step.index:
                continue
            cap = float(by_step.loc[s, "lost_ms"])
            total += min(cap, float(costs.get(s, costs.get(str(s), cap))))
        return total
    if kind in ("no_warmup", "step_variance"):
        return acc.step_lost(steps)
    return None
