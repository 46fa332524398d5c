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
from hpcprof_kit.traces.view.time_lost import LOST_PARTS, spread

if TYPE_CHECKING:  # pragma: no cover
    pass

RANK_NOISE_TIMES = 4.0  # a straggler's lead must beat this many times the ranks' own spread
# one rank is the straggler when it is the slowest in this share of the steps with a clear
# slowest rank (and two of them at least); else, in three steps or more, the slowest rotates
SAME_RANK_SHARE = 0.7
TOGETHER = 0.25  # a slowest rank ahead of the next by under this share of its lead: a group
FOLDED = 0.42  # the spread (time_lost.spread) of |Z| for a normal Z: 0.42 of its sigma


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
    "in two steps or more (persistent when in half of them or more, else intermittent); or, "
    "where the run directory says where each rank ran, two ranks or more of one node slow "
    "together in two steps or more, as one finding. "
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
    group = _node_group(view, cells, walls)
    if group is not None:  # the steps a node's ranks made slow together are theirs
        cells, walls = cells.drop(index=group["steps"]), walls.drop(index=group["steps"])
        return [group, *_one_rank(view, cells, walls)] if len(cells) else [group]
    return _one_rank(view, cells, walls)


def _one_rank(view: RunView, cells, walls) -> list[dict]:
    """The straggler, or the rotating one, of the steps in ``cells``."""
    top, cost, clear, walls_ms, saved = _clear_leads(cells, walls)
    ranks, steps = np.asarray(cells.columns), np.asarray(cells.index)
    clear = _beyond_noise(view, ranks, steps, top, clear)
    counts = np.bincount(top[clear], minlength=len(ranks))
    lead = int(np.argmax(counts))
    rest = clear & (top != lead)
    # one rank: slowest in most clear steps, or by far the largest lead (the other clear
    # steps are the ranks' noise)
    alone = not rest.any() or float(np.median(cost[clear & (top == lead)])) >= 2 * float(
        np.median(cost[rest]))  # fmt: skip
    if counts[lead] >= 2 and (counts[lead] >= SAME_RANK_SHARE * clear.sum() or alone):
        mine = clear & (top == lead)
        value = float(np.median(pct(cost[mine], walls_ms[mine])))
        return [_straggler_finding(view, int(ranks[lead]), steps[mine], cost[mine], value,
                                   len(steps), saved[mine])]  # fmt: skip
    if clear.any() and float(np.median(saved[clear])) < TOGETHER * float(np.median(cost[clear])):
        # the slowest rank leads the next one by little of its lead over the median: several
        # ranks are slow together; which node they share needs the run's placement
        together = sorted({int(r) for r in ranks[top[clear]]})
        view.coverage["straggler"] = (
            f"several ranks are slow together (the slowest of them: {together}, each step "
            "barely ahead of the next): a group, not one rank; where they ran is unknown "
            "(load the run directory, whose manifest names its hosts), so no group finding"
        )
        return []
    if clear.sum() >= 3 and (counts > 0).sum() >= 2:
        value = float(np.median(pct(cost[clear], walls_ms[clear])))
        view.coverage["straggler"] = ("no one straggler: the slowest rank changes from step "
                                      "to step (rotating_straggler)")  # fmt: skip
        return [_rotating_finding(view, ranks[top[clear]], steps[clear], cost[clear], value,
                                  saved[clear])]  # fmt: skip
    return []


@rule(
    "rotating_straggler",
    definition="the slowest rank changes from step to step: in three steps or more a rank "
    "leads the median rank by more than the threshold and 4 x the ranks' own spread, and no "
    "one rank leads in most of them. Value: its cost as % of the step, median over the steps",
    threshold=5.0,
    unit="% of step",
    noise="as straggler's: each step's lead beats 4 x the other ranks' spread",
    advice="No one rank is slow: the work differs from rank to rank and step to step. Look "
    "for uneven batches (variable-length samples: bucket or pad by length, balance tokens per "
    "rank), data-dependent compute, or a cause the ranks share on a node (another job, "
    "thermal throttling); compare a slow and a typical rank's kernels with traces.same_name.",
    needs=("steps", "ranks", "min_steps:3"),
)
def rotating_straggler(view: RunView) -> list[dict]:
    """Made by :func:`straggler`: one reading of the ranks names one straggler or a rotating
    one, so this rule adds nothing of its own."""
    return []


def _cause(view: RunView, rank: int, step: int) -> str:
    """What made ``rank`` slower than the step's median rank in ``step``: the part of the
    what-if account in which its cell leads the median rank's the most, in words."""
    c = view.time_lost.cells
    if c is None:
        return "unknown"
    here = c[c["step"] == step]
    row = here[here["rank"] == rank]
    if row.empty:
        return "unknown"
    parts = [p for p in LOST_PARTS if p != "waiting_for_ranks"]
    lead = {p: float(row[p].iloc[0]) - float(here[p].median()) for p in parts}
    top = max(lead, key=lead.get)
    return f"{top} {lead[top]:.1f} ms" if lead[top] > 0 else "within noise"


def _rotating_finding(view, slow_ranks, steps, cost, value, saved) -> dict:
    by_step = {int(s): int(r) for s, r in zip(steps, slow_ranks, strict=True)}
    causes = {int(s): _cause(view, int(r), int(s)) for s, r in by_step.items()}
    evidence = {
        "slow_rank_by_step": by_step,
        "cause_by_step": causes,
        "cost_ms_by_step": {int(s): round(float(c), 3) for s, c in zip(steps, cost,
                                                                      strict=True)},
        "cost_ms_per_step": round(float(np.median(cost)), 3),
        "saved_if_typical_ms_by_step": {int(s): round(float(v), 3) for s, v in zip(
            steps, saved, strict=True)},
    }  # fmt: skip
    listed = ", ".join(f"{s}: rank {r}" for s, r in by_step.items())
    kinds = {c.split(" ")[0] for c in causes.values()}
    same = "its kernels running longer: uneven batches, or a slower device?" if kinds == {
        "kernels_slower"} else "causes: " + ", ".join(sorted(kinds))  # fmt: skip
    return finding(
        "rotating_straggler",
        set(by_step.values()),
        steps,
        value,
        f"the slowest rank changes from step to step (step {listed}): each works "
        f"{evidence['cost_ms_per_step']} ms longer than the median rank before the "
        f"collective, and the others wait for it ({same})",
        evidence,
        gain_ms=float(np.sum(cost)) / max(1, view.n_steps),
    )


def _clear_leads(cells, walls):
    """Per step: the rank that works longest (its column index), its lead over the median
    rank (ms), whether that lead is clear (above the threshold and the ranks' own noise), the
    step's wall (ms), and what the step would save were that rank typical (its lead over the
    next slowest, with which the step would end; ms)."""
    grid = cells.to_numpy(dtype=float)
    filled = np.where(np.isnan(grid), -np.inf, grid)
    top = np.argmax(filled, axis=1)
    rows = np.arange(len(top))
    med = np.nanmedian(grid, axis=1)
    cost = grid[rows, top] - med
    saved = grid[rows, top] - np.sort(filled, axis=1)[:, -2]
    # the ranks' own spread, measured without the slowest (with two ranks: none to measure)
    others = grid.copy()
    others[rows, top] = np.nan
    if grid.shape[1] > 2:
        dev = np.abs(others - np.nanmedian(others, axis=1, keepdims=True))
        noise = float(np.nanmedian(1.4826 * np.nanmedian(dev, axis=1)))
    elif len(cost) >= 4:  # two ranks: the lead's own spread over the steps is all there is.
        # Two estimates of the same sigma (half the difference's), each from a faster half,
        # each widened by a pattern the other is not: the lead, folded at 0 (its spread is
        # 0.42 of the difference's), by a slow rank in every step; the signed difference by
        # a slow rank in some steps only. The smaller one is the ranks' noise.
        diff = grid[:, 0] - grid[:, 1]
        noise = min(spread(cost) / FOLDED, spread(diff) / 2)
    else:  # two ranks, under four steps: no spread to measure; the threshold alone decides
        noise = 0.0
    walls_ms = walls.to_numpy(dtype=float)
    clear = (cost >= 0.01 * RULES["straggler"].threshold * walls_ms) & (
        cost > RANK_NOISE_TIMES * noise
    )
    return top, cost, clear, walls_ms, saved


def _node_group(view: RunView, cells, walls) -> dict | None:
    """One finding for ranks of one node slow together: in two steps or more, two ranks or
    more lead the median rank by the threshold and 4 x the ranks' spread (the faster half's,
    so the group does not widen it), every one of them on the same host. None when the run's
    placement is unknown (traces outside a run directory): no group is guessed."""
    from hpcprof_kit.traces.table.placement import node_of

    if not view.placement or cells.shape[1] < 3:
        return None
    grid = cells.to_numpy(dtype=float)
    ranks, steps = np.asarray(cells.columns), np.asarray(cells.index)
    med = np.nanmedian(grid, axis=1, keepdims=True)
    noise = np.array([spread(row) for row in grid])[:, None]
    walls_ms = walls.to_numpy(dtype=float)[:, None]
    slow = (grid - med >= 0.01 * RULES["straggler"].threshold * walls_ms) & (
        grid - med > RANK_NOISE_TIMES * noise)  # fmt: skip
    hosts = [node_of(view.placement, int(r)) for r in ranks]
    by_node: dict[str, list[int]] = {}
    for i in range(len(steps)):
        mine = np.flatnonzero(slow[i])
        on = {hosts[j] for j in mine}
        if mine.size >= 2 and len(on) == 1 and None not in on:
            by_node.setdefault(next(iter(on)), []).append(i)
    if not by_node:
        return None
    host, rows = max(by_node.items(), key=lambda kv: len(kv[1]))
    if len(rows) < 2:
        return None
    members = sorted({int(ranks[j]) for i in rows for j in np.flatnonzero(slow[i])})
    on_node = [int(r) for r, h in zip(ranks, hosts, strict=True) if h == host]
    inside = np.isin(ranks, members)
    lead = [float(np.nanmedian(grid[i, inside] - med[i, 0])) for i in rows]
    saved = [max(0.0, float(np.nanmin(grid[i, inside]) - np.nanmax(grid[i, ~inside])))
             for i in rows]  # fmt: skip
    value = float(np.median([100 * c / walls_ms[i, 0] for c, i in zip(lead, rows,
                                                                       strict=True)]))  # fmt: skip
    when = [int(steps[i]) for i in rows]
    evidence = {
        "node": host,
        "ranks_on_node": on_node,
        "steps": when,
        "cost_ms_by_step": {s: round(c, 3) for s, c in zip(when, lead, strict=True)},
        "saved_if_typical_ms_by_step": {s: round(v, 3) for s, v in zip(when, saved,
                                                                       strict=True)},
        "placement": f"{view.placement['ranks_per_node']} ranks per node, in blocks",
    }  # fmt: skip
    every = "every rank of it" if members == on_node else f"{len(members)} of its {len(on_node)}"
    return finding(
        "straggler", members, when, value,
        f"ranks {', '.join(map(str, members))}, all on node {host} ({every}), work "
        f"{float(np.median(lead)):.3f} ms a step longer than the median rank before the "
        f"collective in steps {', '.join(map(str, when))}, and the other ranks wait for them: "
        "a cause on that node",
        evidence, gain_ms=float(np.sum(lead)) / max(1, view.n_steps),
        advice=f"Look at node {host}: other jobs or processes on it (top, nvidia-smi or "
        "xpu-smi), its GPUs' clocks and temperature, its CPU binding (notebook 07) and its "
        "network link; rerun without it (exclude the host) to confirm.",
    )  # fmt: skip


def _beyond_noise(view: RunView, ranks, steps, top, clear) -> np.ndarray:
    """``clear`` less the steps whose slowest rank stalled with no op (host_stall's, not a
    straggler's) and those whose slowest rank's cell the what-if account calls noise: a lead
    the account calls noise costs the run nothing, and no finding or table says otherwise."""
    stalled = {(int(r), int(st)) for f in view.found.get("host_stall", []) for r in f["ranks"]
               for st in f["steps"]}  # fmt: skip
    cells_lost = view.time_lost.cells
    if cells_lost is not None:
        quiet = cells_lost[cells_lost["within_noise"]]
        stalled |= set(zip(quiet["rank"].tolist(), quiet["step"].tolist(), strict=True))
    keep = [(int(ranks[t]), int(st)) not in stalled for t, st in zip(top, steps, strict=True)]
    return clear & np.array(keep, dtype=bool)


def straggler_steps(view: RunView) -> dict[int, list[int]]:
    """The steps in which each rank is the straggler by the rule's own test (its lead beats the
    threshold and the ranks' noise), by rank; a rank never clearly last is absent. What the
    report's tables list, so that they never name a straggler the rule calls noise."""
    cells, walls = _busy_grid(view)
    if cells.shape[1] < 2:
        return {}
    top, _cost, clear, _walls, _saved = _clear_leads(cells, walls)
    ranks, steps = np.asarray(cells.columns), np.asarray(cells.index)
    clear = _beyond_noise(view, ranks, steps, top, clear)
    found: dict[int, list[int]] = {}
    for k in np.flatnonzero(clear):
        found.setdefault(int(ranks[top[k]]), []).append(int(steps[k]))
    return found


def _straggler_finding(view, rank, steps, cost, value, n_steps, saved) -> dict:
    b = view.rows[view.rows["step"].isin([int(s) for s in steps])]  # its steps: the headline's
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
        "cause_by_step": {int(s): _cause(view, rank, int(s)) for s in steps},
        "cost_ms_per_step": round(float(np.median(cost)), 3),
        "cost_ms_by_step": {int(s): round(float(c), 3) for s, c in zip(steps, cost, strict=True)},
        "saved_if_typical_ms_by_step": {
            int(s): round(float(v), 3) for s, v in zip(steps, saved, strict=True)
        },
        # in its steps, the median of each
        "worked_before_waiting_ms": round(float(per.loc[rank, "busy"]), 3),
        "median_other_rank_worked_ms": round(float(others["busy"].median()), 3),
        "its_exposed_comm_ms": round(float(per.loc[rank, "wait"]), 3),
        "median_other_rank_exposed_comm_ms": round(float(others["wait"].median()), 3),
        "slower_than_median_rank": slower,
    }
    what = f"; slowest against the other ranks: {slower[0]['name']}" if slower else ""
    causes = evidence["cause_by_step"]
    if len({c.split(" ")[0] for c in causes.values()}) > 1:  # never one cause for two
        what += "; by step: " + "; ".join(f"step {s}: {c}" for s, c in causes.items())
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
