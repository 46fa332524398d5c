"""Rules over a rank's steps: the first step is not a steady one, and step times vary.

>>> ramp_length([35.0, 72.0, 96.0, 97.0, 96.5, 97.2])
2
"""

from __future__ import annotations

import numpy as np

from hpcprof_kit.traces.findings.base import RULES, finding, rule
from hpcprof_kit.traces.view.run_view import RunView


def ramp_length(wall) -> int:
    """Leading steps that rise towards the steady step time: the host filling the device's
    launch queue of a GPU-bound run, its steps measuring the host, not the run (at most half
    the steps)."""
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
    out_ranks, ratios, steps = [], [], set()
    for rank, ranked, wall in view.walls:
        if wall.size < 3:
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


@rule(
    "step_variance",
    definition="(p90 - p10) / median of a rank's step wall times, after a warmup outlier, a "
    "leading ramp (the host filling the launch queue), a truncated last step and the steps "
    "a straggler finding explains are set aside (four steps or more); two steps or more "
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
    explained = {s for f in view.found.get("straggler", []) for s in f["steps"]}
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
