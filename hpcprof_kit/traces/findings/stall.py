"""A host stall: host time with no traced op on one rank while its device idles, read from
the run's what-if account (:mod:`~hpcprof_kit.traces.view.time_lost`).

>>> RULES["host_stall"].unit
'% of the ideal step'
"""

from __future__ import annotations

import numpy as np

from hpcprof_kit.traces.findings.base import RULES, finding, rule
from hpcprof_kit.traces.findings.steps import LIKE_SHARE
from hpcprof_kit.traces.view.run_view import RunView


def stalled_cells(view: RunView):
    """The account's cells whose lost time is mostly ``host_untraced`` beyond the threshold,
    on fewer than 3 in 4 ranks of their step (on most ranks it is a slow step): a table
    with ``rank, step, host_untraced, lost_ms``."""
    acc = view.time_lost
    if acc.cells is None or acc.ideal_step_ms <= 0:
        return None
    c = acc.cells
    least = RULES["host_stall"].threshold / 100 * acc.ideal_step_ms
    hit = (c["host_untraced"] >= least) & (c["host_untraced"] >= 0.5 * c["lost_ms"])
    # a rank with a third of the step's worst stall or less was held up by it: not its own
    hit &= c["host_untraced"] >= LIKE_SHARE * c.groupby("step")["host_untraced"].transform("max")
    ranks_in_step = c.groupby("step")["rank"].transform("size")
    hits_in_step = hit.groupby(c["step"]).transform("sum")
    alone = hits_in_step * 4 < ranks_in_step * 3 if c["rank"].nunique() > 1 else hit
    return c[hit & alone]


@rule(
    "host_stall",
    definition="host time with no traced op while the device idles (the what-if account's "
    "``host_untraced``, most of the cell's lost time), on fewer than 3 in 4 ranks of a step",
    threshold=5.0,
    unit="% of the ideal step",
    noise="beyond 3 x the spread over (rank, step) cells of the time nothing runs, and 2 % of "
    "the ideal step",
    advice="Find what the host did: record with_stack=True, or sample the process with "
    "py-spy (py-spy record --native, py-spy dump during the stall). A garbage-collector pause "
    "goes with gc.freeze() after setup, or gc.disable() around the loop and gc.collect() "
    "between steps; a file write or a lock belongs outside the step or in a thread.",
    needs=("steps",),
)
def host_stall(view: RunView) -> list[dict]:
    cells = stalled_cells(view)
    if cells is None or cells.empty:
        return []
    acc = view.time_lost
    taken = {s for f in view.found.get("slow_steps", []) for s in f["steps"]}
    cells = cells[~cells["step"].isin(taken)]
    out = []
    for rank, mine in cells.groupby("rank", sort=True):
        steps = mine["step"].to_numpy(dtype=np.int64)
        stall = mine["host_untraced"].to_numpy(dtype=float)
        value = float(np.max(stall)) / acc.ideal_step_ms * 100
        when = ", ".join(f"step {s} ({v:.1f} ms)" for s, v in zip(steps, stall, strict=True))
        others = "; the other ranks wait for it" if acc.cells["rank"].nunique() > 1 else ""
        evidence = {
            "stall_ms_by_step": {int(s): round(float(v), 3) for s, v in zip(steps, stall,
                                                                             strict=True)},
            "cost_ms_by_step": {int(s): round(float(v), 3) for s, v in zip(steps, stall,
                                                                           strict=True)},
            "ideal_step_ms": round(acc.ideal_step_ms, 3),
        }  # fmt: skip
        out.append(finding(
            "host_stall", [int(rank)], steps, value,
            f"rank {int(rank)}'s host stops with no traced op while its device idles: {when}"
            f"{others} (a garbage-collector pause, a file write, a lock?)",
            evidence,
        ))  # fmt: skip
    return out
