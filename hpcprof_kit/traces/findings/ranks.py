"""Rules across ranks: the straggler (persistent or intermittent) and a run of which one rank
was traced.

>>> world_size({0: {"world_size": 8}, 1: {}})
8
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.analyses.breakdown import busy_and_wait
from hpcprof_kit.traces.findings.base import RULES, finding, pct, rule
from hpcprof_kit.traces.view.run_view import RunView
from hpcprof_kit.traces.view.slower import slower_names

if TYPE_CHECKING:  # pragma: no cover
    pass

RANK_NOISE_TIMES = 4.0  # a straggler's lead must beat this many times the ranks' own spread


def _busy_grid(view: RunView):
    """steps x ranks busy ms (wall - exposed comm), the steps and the ranks."""
    rows = view.rows[view.rows["step"] >= 0]
    busy, _ = busy_and_wait(rows)
    cells = rows.assign(busy=busy / 1e6).pivot(index="step", columns="rank", values="busy")
    walls = rows.groupby("step")["wall_ns"].median().reindex(cells.index) / 1e6
    return cells, walls


@rule(
    "straggler",
    definition="the rank the others wait for: in a step, the rank that works longest before "
    "the collective, by more than the threshold and 4 x the ranks' own spread; the same rank "
    "in two steps or more (persistent when in half of them or more, else intermittent). "
    "Value: its cost (how long the others wait) as % of the step, median over its steps",
    threshold=5.0,
    unit="% of step",
    noise="its lead beats 4 x the other ranks' spread (1.4826 x MAD, median over steps); "
    "with two ranks, 4 x the spread of the lead itself over the steps (four steps or more)",
    advice="",  # names the rank: made by the rule
    needs=("steps", "ranks", "min_steps:2"),
)
def straggler(view: RunView) -> list[dict]:
    cells, walls = _busy_grid(view)
    if cells.shape[1] < 2:
        return []
    top, cost, clear, walls_ms = _clear_leads(cells, walls)
    ranks, steps = np.asarray(cells.columns), np.asarray(cells.index)
    named = [r for r in np.unique(top[clear]) if (clear & (top == r)).sum() >= 2]
    if len(named) > 1:  # one rank may still stand out: twice the others' cost, or more
        lead = sorted(((float(np.median(cost[clear & (top == r)])), r) for r in named),
                      reverse=True)  # fmt: skip
        if lead[0][0] >= 2 * lead[1][0]:
            named = [lead[0][1]]
    if len(named) > 1:
        view.coverage["straggler"] = (
            "no straggler: the slowest rank changes from step to step (ranks "
            f"{', '.join(str(int(ranks[r])) for r in named)}), which is the ranks' own noise"
        )
        return []
    out = []
    for r in named:
        mine = clear & (top == r)
        value = float(np.median(pct(cost[mine], walls_ms[mine])))
        out.append(_straggler_finding(view, int(ranks[r]), steps[mine], cost[mine], value,
                                      len(steps)))  # fmt: skip
    return out


def _clear_leads(cells, walls):
    """Per step: the rank that works longest (its column index), its lead over the median
    rank (ms), whether that lead is clear (above the threshold and the ranks' own noise), and
    the step's wall (ms)."""
    grid = cells.to_numpy(dtype=float)
    filled = np.where(np.isnan(grid), -np.inf, grid)
    top = np.argmax(filled, axis=1)
    rows = np.arange(len(top))
    med = np.nanmedian(grid, axis=1)
    cost = grid[rows, top] - med
    # the ranks' own spread, measured without the slowest (with two ranks: none to measure)
    others = grid.copy()
    others[rows, top] = np.nan
    if grid.shape[1] > 2:
        dev = np.abs(others - np.nanmedian(others, axis=1, keepdims=True))
        noise = float(np.nanmedian(1.4826 * np.nanmedian(dev, axis=1)))
    elif len(cost) >= 4:  # two ranks: the lead's own spread over the steps is all there is
        noise = 1.4826 * float(np.nanmedian(np.abs(cost - np.nanmedian(cost))))
    else:  # two ranks, under four steps: no spread to measure; the threshold alone decides
        noise = 0.0
    walls_ms = walls.to_numpy(dtype=float)
    clear = (cost >= 0.01 * RULES["straggler"].threshold * walls_ms) & (
        cost > RANK_NOISE_TIMES * noise
    )
    return top, cost, clear, walls_ms


def straggler_steps(view: RunView) -> dict[int, list[int]]:
    """The steps in which each rank is the straggler by the rule's own test (its lead beats the
    threshold and the ranks' noise), by rank; a rank never clearly last is absent. What the
    report's tables list, so that they never name a straggler the rule calls noise."""
    cells, walls = _busy_grid(view)
    if cells.shape[1] < 2:
        return {}
    top, _cost, clear, _walls = _clear_leads(cells, walls)
    ranks, steps = np.asarray(cells.columns), np.asarray(cells.index)
    found: dict[int, list[int]] = {}
    for k in np.flatnonzero(clear):
        found.setdefault(int(ranks[top[k]]), []).append(int(steps[k]))
    return found


def _straggler_finding(view, rank, steps, cost, value, n_steps) -> dict:
    b = view.rows[view.rows["step"] >= 0]
    busy, wait = busy_and_wait(b)
    per = b.assign(busy=busy / 1e6, wait=wait / 1e6).groupby("rank")[["busy", "wait"]].median()
    others = per.drop(index=rank)
    if view.df is not None:
        slower = slower_names(view.df, rank)
    else:
        slower = view.slower(rank) if view.slower else []
    persistent = len(steps) * 2 >= n_steps
    evidence = {
        "straggler_steps": f"{len(steps)} of {n_steps}",
        "steps": [int(s) for s in steps],
        "pattern": "persistent" if persistent else "intermittent",
        "cost_ms_per_step": round(float(np.median(cost)), 3),
        "cost_ms_by_step": {int(s): round(float(c), 3) for s, c in zip(steps, cost, strict=True)},
        "worked_before_waiting_ms": round(float(per.loc[rank, "busy"]), 3),
        "median_other_rank_worked_ms": round(float(others["busy"].median()), 3),
        "its_exposed_comm_ms": round(float(per.loc[rank, "wait"]), 3),
        "median_other_rank_exposed_comm_ms": round(float(others["wait"].median()), 3),
        "slower_than_median_rank": slower,
    }
    what = f"; slowest against the other ranks: {slower[0]['name']}" if slower else ""
    when = (
        "in every step"
        if len(steps) == n_steps
        else (f"in steps {', '.join(str(int(s)) for s in steps)} ({evidence['pattern']})")
    )
    return finding(
        "straggler", [rank], steps, value,
        f"rank {rank} works {evidence['cost_ms_per_step']} ms a step longer than the median "
        f"rank before the collective {when}, and the other ranks wait that long for it{what}",
        evidence, gain_ms=float(np.sum(cost)) / n_steps,
        advice=f"Put rank {rank} beside a typical rank on the timeline "
        f"(traces.plot_timeline(df, ranks=[{rank}, ...])); compare its kernels with "
        "traces.same_name; check its CPU binding and GPU (notebook 07), its node, and "
        "whether its data shard is larger" + ("." if persistent else
        "; an intermittent straggler points at something periodic on its node (other jobs, "
        "a daemon, thermal throttling) or at uneven batches."),
    )  # fmt: skip


def world_size(meta: dict) -> int:
    """The largest world size the ranks' traces record (1 when none does); ``meta`` is the
    table's ``attrs["ranks"]``."""
    sizes = [m.get("world_size") for m in meta.values()]
    return int(max([s for s in sizes if s], default=1))


@rule(
    "one_rank_only",
    definition="ranks traced, against the world size the trace records",
    threshold=1,
    unit="ranks traced",
    noise="none needed: a count",
    advice="Trace every rank for a few steps (the kit's trace_ranks='all'), or at least a "
    "slow, a typical and a fast one; then compare them (traces.rank_steps).",
)
def one_rank_only(view: RunView) -> list[dict]:
    ranks, world = view.meta, world_size(view.meta)
    if len(ranks) != 1 or world <= 1:
        return []
    rank = next(iter(ranks))
    return [
        finding(
            "one_rank_only", [rank], [], 1,
            f"one rank (rank {rank}) of {world} was traced: stragglers, skew and the other "
            "ranks' waiting cannot be seen",
            {"world_size": int(world), "traced": [int(rank)]},
        )
    ]  # fmt: skip
