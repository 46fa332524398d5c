"""Findings: what looks wrong with a run, the number that says so, the events behind it, the
estimated gain if fixed, and what to try. Every rule is deterministic and reads one prepared
view of the run (:class:`~hpcprof_kit.traces.view.run_view.RunView`: the step breakdown, the
straggler table, the per-rank-and-step signals), so the same trace always gives the
same findings, and a report of per-rank summaries finds what a report of the table finds.

One module per rule family, each rule one function registered with its kind, definition,
threshold, noise test and advice (:data:`RULES`): ``ranks`` (straggler, a rotating slowest rank, one rank traced),
``steps`` (warmup, variance, slow steps on every rank), ``stall`` (host time with no op), ``comm`` (exposed, small, slow collectives), ``host`` (device
idle, DataLoader, syncs, launches, short kernels), ``copies`` (pageable, blocking),
``alloc`` (allocator churn), ``kernels`` (tensor cores, graph breaks). On a CPU-only run
``launch_bound`` and ``allocator_churn`` read the host's own signals (``view.host_signals``: loops
of tiny aten ops, large host blocks freed in their step). To add a rule: write
its function in the family's module with ``@rule(...)`` and add its kind to
``FINDING_KINDS``.

A rule fires only when its effect beats the run's own spread (step to step, rank to rank).
A rule that cannot run says why in :attr:`Findings.coverage` (no steps, too few steps, no
device, no message sizes): it is never counted as "nothing found".

A finding is a dict: ``kind``, ``ranks``, ``steps``, ``value``, ``threshold``, ``unit``,
``summary`` (one sentence), ``evidence`` (the events and numbers behind it), ``advice`` and,
where it can be estimated, ``gain_ms_per_step``; and ``lost_ms``, its total cost to the run
in wall ms from the what-if account (:mod:`~hpcprof_kit.traces.view.time_lost`), or None
where the account cannot attribute it (a problem of every step is in the ideal step too).

>>> FINDING_KINDS[:4]
('straggler', 'rotating_straggler', 'slow_steps', 'host_stall')
>>> sorted(RULES) == sorted(FINDING_KINDS)
True

The vocabulary (generated from the registry):

"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprof_kit.traces.findings import alloc, comm, copies, host, kernels, ranks, stall  # noqa: F401 (they register)
from hpcprof_kit.traces.findings import steps as _steps  # noqa: F401
from hpcprof_kit.traces.findings.base import RULES, Rule, device_use, needs_met, stepped
from hpcprof_kit.traces.findings.ranks import world_size
from hpcprof_kit.traces.findings.startup import WARMUP_ADVICE, startup
from hpcprof_kit.traces.view.time_lost import finding_lost

if TYPE_CHECKING:  # pragma: no cover
    from hpcprof_kit.traces.view.run_view import RunView

FINDING_KINDS = (
    "straggler",
    "rotating_straggler",
    "slow_steps",
    "host_stall",
    "exposed_communication",
    "device_idle_host_bound",
    "short_kernels",
    "synchronize_in_step",
    "graph_breaks",
    "no_warmup",
    "one_rank_only",
    "step_variance",
    "pageable_copy",
    "sync_copy",
    "data_loading",
    "launch_bound",
    "allocator_churn",
    "no_tensor_cores",
    "small_collectives",
    "low_bus_bandwidth",
)
THRESHOLDS = {k: RULES[k].threshold for k in FINDING_KINDS}
# The order rules run in: later ones read earlier findings. slow_steps and host_stall come
# first (a straggler's steps leave out a stall; no_warmup steps aside when the first step's
# cause recurs), rotating_straggler takes what straggler's reading of the ranks found, and
# step_variance sets aside the steps all of them explain and the warmup step.
FIRST = ("slow_steps", "host_stall", "straggler", "rotating_straggler")
RUN_ORDER = (*FIRST, *(k for k in FINDING_KINDS if k not in (*FIRST, "step_variance")),
             "step_variance")  # fmt: skip


class Findings(list):
    """The findings of a run (a list of dicts, in ``FINDING_KINDS`` order) with
    ``coverage``: kind -> why that rule did not run or does not apply, and ``notes`` on the
    run (no steps, a truncated last step)."""

    coverage: dict[str, str]
    notes: list[str]


def vocabulary() -> str:
    """The vocabulary as text: each kind, what it measures, its threshold and noise test."""
    lines = []
    for kind in FINDING_KINDS:
        r = RULES[kind]
        lines.append(f"- ``{kind}`` ({r.threshold:g} {r.unit}): {r.definition}. "
                     f"Noise: {r.noise}.")  # fmt: skip
    return "\n".join(lines) + "\n"


__doc__ = (__doc__ or "") + vocabulary()


def find(view: RunView) -> Findings:
    """Every finding of a run, in ``FINDING_KINDS`` order, from its prepared view
    (:class:`~hpcprof_kit.traces.view.run_view.RunView`: of the trace table, or of the
    per-rank summaries of an ``--mpi`` report). The rules leave their findings and the reasons
    one could not run in the view.

    >>> from hpcprof_kit import traces                                      # doctest: +SKIP
    >>> from hpcprof_kit.traces.view.run_view import RunView                # doctest: +SKIP
    >>> [f["kind"] for f in find(RunView.of(traces.load("runs/x/traces")))]  # doctest: +SKIP
    """
    b = view.b
    out = Findings()
    out.coverage, out.notes = view.coverage, []
    if len(b) == 0:
        out.notes.append("the trace has no events to measure steps with")
        return out
    if not view.stepped:
        out.notes.append(
            "the trace has no ProfilerStep steps: the rules that need no steps ran over the "
            "whole trace; the step rules could not run"
        )
    used = device_use(view)
    if used:
        out.notes.append(f"the trace holds no device events, but the run used a device "
                         f"({'; '.join(used)}): its device events are missing; the device "
                         "rules could not run, and no CPU advice is given")  # fmt: skip
    for rank, step in sorted(view.truncated):
        out.notes.append(
            f"rank {rank}'s last step ({step}) is cut short by the end of the recording: set aside"
        )
    for kind in RUN_ORDER:
        r: Rule = RULES[kind]
        why = needs_met(r, view)
        if why is not None:
            view.coverage[kind] = why
            continue
        view.found.setdefault(kind, [])
        for f in r.check(view):  # a rule may name a kind of its own family (straggler's)
            view.found.setdefault(f["kind"], []).append(f)
    idle = view.found.get("device_idle_host_bound", [])
    causes = [k for k in host.HOST_SIDE if view.found.get(k)]
    for f in idle:
        f["evidence"]["explained_by"] = causes
    found = [f for k in FINDING_KINDS for f in view.found.get(k, [])]
    for f in found:  # each finding's cost to the run, from the what-if account
        lost = finding_lost(f, view.time_lost)
        f["lost_ms"] = None if lost is None else round(float(lost), 3)
    if not view.stepped:  # one pseudo step, start-up and all: no gain is per step
        for f in found:
            if "gain_ms_per_step" in f:
                f["evidence"]["gain_ms_over_the_trace"] = f.pop("gain_ms_per_step")
        spans = startup(view)
        if spans is not None and len(spans):
            ms = float((spans["steady_ns"] - spans["start_ns"]).max()) / 1e6
            out.notes.append(f"start-up, {ms:.1f} ms from the trace's start to the first device "
                             "event, is set apart from the steady state; "
                             f"{WARMUP_ADVICE}")  # fmt: skip
    out.extend(found)
    return out


__all__ = ["FINDING_KINDS", "RULES", "THRESHOLDS", "Findings", "find", "stepped", "vocabulary",
           "world_size"]  # fmt: skip
