"""Rules over a rank's steps: the first step is not a steady one, and step times vary.

>>> ramp_length([35.0, 72.0, 96.0, 97.0, 96.5, 97.2])
2
"""

from __future__ import annotations

import numpy as np

from hpcprof_kit.traces.findings.base import RULES, finding, rule
from hpcprof_kit.traces.view.run_view import RunView
from hpcprof_kit.traces.view.time_lost import LOST_PARTS, ramp_length


@rule(
    "no_warmup",
    definition="the first recorded step's wall time against the median of the others "
    "(three steps or more)",
    threshold=1.5,
    unit="x the median step",
    noise="a ratio of 1.5 is far above a few % of step-to-step jitter",
    advice="Record after a warmup: torch.profiler.schedule(wait=1, warmup=1, active=N); leave "
    "the first step out of any comparison.",
    needs=("steps", "min_steps:3"),
)
def no_warmup(view: RunView) -> list[dict]:
    # a first step another finding explains, with a cause that recurs later, is no warm-up
    recurs = {s for k in EXPLAINING for f in view.found.get(k, []) for s in f["steps"]}
    out_ranks, ratios, steps = [], [], set()
    for rank, ranked, wall in view.walls:
        if wall.size < 3 or int(ranked[0]) in recurs:  # the same cause recurs: slow_steps
            continue
        ratio = wall[0] / float(np.median(wall[1:]))
        if ratio >= RULES["no_warmup"].threshold:
            out_ranks.append(rank)
            ratios.append(ratio)
            steps.add(int(ranked[0]))
    if not out_ranks:
        return []
    value = float(max(ratios))
    return [
        finding(
            "no_warmup", out_ranks, sorted(steps), value,
            f"the first recorded step takes {value:.1f} x the others: it is not a steady step",
            {"first_step_ratio_by_rank": {int(r): round(v, 2) for r, v in zip(
                out_ranks, ratios, strict=True)}},
        )
    ]  # fmt: skip


LIKE_SHARE = 0.3  # a rank is slow like the others in a step with a third of the worst or more
# the findings whose steps step_variance sets aside: they explain those steps' time
EXPLAINING = ("straggler", "rotating_straggler", "slow_steps", "host_stall")


@rule(
    "step_variance",
    definition="(p90 - p10) / median of a rank's step wall times, after a warmup outlier, a "
    "leading ramp (the host filling the launch queue), a truncated last step and the steps "
    "a straggler, rotating_straggler, slow_steps or host_stall finding explains are set aside (four steps or more); two steps or more "
    "beyond 20 % of the median (one is an outlier)",
    threshold=20.0,
    unit="% of median step",
    noise="the spread itself is the measure; steps other findings explain are set aside",
    advice="Record more steps and compare medians with their spread; look for periodic work "
    "(checkpoints, logging, evaluation) and for other jobs on the node.",
    needs=("steps", "min_steps:4"),
)
def step_variance(view: RunView) -> list[dict]:
    warm = {r for f in view.found.get("no_warmup", []) for r in f["ranks"]}
    explained = {s for k in EXPLAINING for f in view.found.get(k, []) for s in f["steps"]}
    hits, values, steps = [], [], set()
    set_aside = np.fromiter(explained, dtype=np.int64, count=len(explained))
    for rank, ranked, wall in view.walls:
        if rank in warm:
            ranked, wall = ranked[1:], wall[1:]
        ramp = ramp_length(wall)
        ranked, wall = ranked[ramp:], wall[ramp:]
        kept = ~np.isin(ranked, set_aside)
        ranked, wall = ranked[kept], wall[kept]
        if wall.size < 4:
            continue
        p10, med, p90 = np.quantile(wall, [0.1, 0.5, 0.9])
        spread = 100.0 * (p90 - p10) / med if med > 0 else 0.0
        # one step apart from the rest is an outlier, not variance: two or more make it
        apart = (wall > med * 1.2) | (wall < med * 0.8)
        if spread >= RULES["step_variance"].threshold and apart.sum() >= 2:
            hits.append(rank)
            values.append(spread)
            steps.update(int(s) for s in ranked[apart])
    if not hits:
        return []
    value = float(max(values))
    return [
        finding(
            "step_variance", hits, sorted(steps), value,
            f"step times vary by {value:.0f} % of the median (p10-p90): one step is not "
            "representative",
            {"p10_p90_pct_by_rank": {int(r): round(v, 2) for r, v in zip(
                hits, values, strict=True)}},
        )
    ]  # fmt: skip


def period_of(steps) -> int | None:
    """The period of equally spaced ``steps`` (two or more), or None.

    >>> period_of([2, 5, 8]), period_of([3, 4]), period_of([1, 3, 4]), period_of([6])
    (3, 1, None, None)
    """
    s = np.unique(np.asarray(steps, dtype=np.int64))
    if s.size < 2:
        return None
    gaps = np.unique(np.diff(s))
    return int(gaps[0]) if gaps.size == 1 else None


def _what(view: RunView, parts: dict[str, float], steps) -> str:
    """The extra time of slow steps in words: a copy to the host, host time with no op..."""
    bits = []
    copy_ms = parts.get("blocking_copy_sync", 0.0)
    if copy_ms > 0.05 * sum(max(v, 0.0) for v in parts.values()):
        rows = view.sig[view.sig["step"].isin(list(steps))] if len(view.sig) else view.sig
        mb = float(rows.groupby("step")["d2h_bytes"].median().median()) / 1e6 if len(rows) \
            and "d2h_bytes" in rows else 0.0  # fmt: skip
        size = f"a {mb:.0f} MB device-to-host copy" if mb >= 1 else "copies and syncs"
        bits.append(f"{size} ({copy_ms:.1f} ms)")
    labels = {
        "kernels_slower": "kernels running longer",
        "data_loading": "waiting for the next batch",
        "allocation": "device memory allocations",
        "launch_gaps": "tiny kernels launched one by one",
        "host_untraced": "host time with no traced op",
    }
    total = sum(max(v, 0.0) for v in parts.values())
    for part, label in labels.items():
        if parts.get(part, 0.0) > 0.05 * total:  # what the extra time mostly was
            bits.append(f"{parts[part]:.1f} ms of {label}")
    text = ", then ".join(bits) if bits else "time no part of the account explains"
    if bits and "copy" in bits[0] and parts.get("host_untraced", 0.0) > 0:
        text += ": a checkpoint or a host-side save?"
    return text


@rule(
    "slow_steps",
    definition="the same steps slow on every rank: 3 in 4 ranks lose their own time in the "
    "step (the what-if account's named parts, not waiting for other ranks), for the same "
    "main part and a third of the step's worst or more, periodic or "
    "one-off; the first step alone is no_warmup's. Value: the median rank's, % of the ideal "
    "step",
    threshold=20.0,
    unit="% of the ideal step",
    noise="each rank's cell beyond the account's noise floor: 3 x the spread (the faster "
    "half) of what its named parts leave of the cells' wall times, and 2 % of the ideal step",
    advice="",  # names what the extra time was: made by the rule
    needs=("steps", "min_steps:3"),
)
def slow_steps(view: RunView) -> list[dict]:
    acc = view.time_lost
    if acc.cells is None or acc.ideal_step_ms <= 0:
        return []
    # each rank's own lost time that the account names: not its waiting for other ranks, not
    # what no part explains (a slow step says what its extra time was)
    c = acc.cells.assign(own=acc.cells["lost_ms"] - acc.cells["waiting_for_ranks"]
                         - acc.cells["unexplained"])  # fmt: skip
    own = c.groupby("step")["own"].median()
    least = RULES["slow_steps"].threshold / 100 * acc.ideal_step_ms
    # each cell's main own part: a step is slow on every rank when 3 in 4 of its ranks lost
    # their own time beyond the threshold and noise, for the same main part (one rank's slow
    # kernels beside another's stall are two problems, not one slow step)
    own_parts = [p for p in LOST_PARTS[:-1] if p != "waiting_for_ranks"]
    main = c[own_parts].idxmax(axis=1)
    # and alike: a rank that lost a third of the step's worst or less only waited on, or
    # after, the others (a stall on one rank, not a slow step on every one)
    alike = c["own"] >= LIKE_SHARE * c.groupby("step")["own"].transform("max")
    hit = (c["own"] > least) & ~c["within_noise"] & alike
    same = main.where(hit).groupby(c["step"]).agg(lambda m: m.value_counts().max() if
                                                  m.notna().any() else 0)  # fmt: skip
    share = same / c.groupby("step")["rank"].size()
    slow = [int(s) for s, v in share.items() if v >= 0.75]
    first = int(own.index.min())
    if not slow or slow == [first]:
        return []
    mine = c[c["step"].isin(slow)]
    parts = {
        p: float(mine.groupby("step")[p].median().mean())
        for p in LOST_PARTS[:-1]
        if p != "waiting_for_ranks"
    }  # the others' waiting is a straggler's, not the step's
    if len(slow) == 1 and c["rank"].nunique() == 1 and (
            parts["host_untraced"] >= 0.5 * float(own.loc[slow[0]])):  # fmt: skip
        return []  # one step of one rank, stalled with no op: host_stall's
    period = period_of(slow)
    if period and period > 1:
        pattern = f"every {period} steps"
    elif len(slow) == 1:
        pattern = "once"
    else:
        pattern = "recurring"
    cost = {s: round(float(own.loc[s]), 3) for s in slow}
    value = float(np.median(list(cost.values()))) / acc.ideal_step_ms * 100
    what = _what(view, parts, slow)
    ranks = sorted(int(r) for r in c["rank"].unique())
    evidence = {
        "pattern": pattern,
        "period": period if period and period > 1 else None,
        "cost_ms_by_step": cost,
        "median_rank_parts_ms": {p: round(v, 3) for p, v in parts.items() if abs(v) >= 0.005},
        "ideal_step_ms": round(acc.ideal_step_ms, 3),
    }
    every = "every rank" if len(ranks) > 1 else "the rank"
    saved = "torch.save" if parts.get("blocking_copy_sync", 0) > 0 else "the periodic work"
    return [finding(
        "slow_steps", ranks, slow, value,
        f"steps {', '.join(str(s) for s in slow)} ({pattern}) are slow on {every}: "
        f"{float(np.median(list(cost.values()))):.1f} ms longer than the ideal step, {what}",
        evidence,
        advice=f"Find what runs in those steps ({pattern}): a checkpoint, an evaluation, "
        f"logging. Move {saved} out of the step or off the critical path (save on one rank, "
        "copy to pinned memory and write in a thread, or use torch.distributed.checkpoint's "
        "async_save); record with_stack=True to see the host work no op covers.",
    )]  # fmt: skip
