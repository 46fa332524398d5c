"""Rules on the host feeding the device: the device idle while the host works, waiting for
the DataLoader, syncs inside the step, launches that pace tiny kernels, and short kernels.

>>> RULES["launch_bound"].unit
'% of step'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hpcprof_kit.traces.analyses.breakdown import bare, text_test
from hpcprof_kit.traces.findings.base import (
    RULES,
    device_events_missing,
    finding,
    lacks,
    pct,
    rule,
    share_rule,
)
from hpcprof_kit.traces.findings.startup import WARMUP_ADVICE, startup, steady_device_idle
from hpcprof_kit.traces.view.run_view import RunView

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

HOST_SIDE = ("data_loading", "synchronize_in_step", "launch_bound", "allocator_churn",
             "sync_copy", "pageable_copy")  # fmt: skip


@rule(
    "device_idle_host_bound",
    definition="the device does nothing while the host works or nothing runs (``host`` + "
    "``idle`` parts of the step, median, % of wall); the evidence says what the host did "
    "meanwhile (the innermost op on the launching thread, each moment counted once) and the "
    "advice follows the cause that holds most of it",
    threshold=10.0,
    unit="% of step",
    noise="a median over the rank's steps",
    advice="Find what the host does while the device waits (the evidence's "
    "host_during_idle_ms_per_step) and move it off the step's path: overlap it with device "
    "work, do it every N steps, or let torch.compile or CUDA/XPU graphs take the launches.",
    needs=("device",),
)
def device_idle_host_bound(view: RunView) -> list[dict]:
    b = view.rows[view.rows["kind"] == "device"]
    if b.empty:
        return []
    spans = startup(view)
    if spans is not None:
        return _idle_after_startup(view, spans)
    wall = b["wall_ns"].to_numpy(dtype=float)
    share = pct(b["host_ns"].to_numpy(dtype=float) + b["idle_ns"].to_numpy(dtype=float), wall)
    per = b.assign(share=share).groupby("rank")["share"].median()
    hot = per[per >= RULES["device_idle_host_bound"].threshold]
    if hot.empty:
        return []
    rows = b[b["rank"].isin(hot.index)]
    evidence = {
        "device_idle_share_pct_by_rank": {int(r): round(float(v), 2) for r, v in hot.items()},
        "other_ranks_median_pct": round(float(per.drop(index=hot.index).median()), 2)
        if len(per) > len(hot)
        else None,
    }
    value = float(hot.max())
    cause, said, advice = idle_cause(view, list(hot.index), len(rows), evidence)
    cut = events_missing(view, list(hot.index), cause, evidence)
    if cut:
        view.coverage["device_idle_host_bound"] = cut
        return []
    return [
        finding(
            "device_idle_host_bound", hot.index, [s for s in rows["step"].unique() if s >= 0],
            value,
            f"the device of rank(s) {', '.join(str(r) for r in hot.index)} does nothing for "
            f"{value:.1f} % of the step while the host works or waits{said}",
            evidence, gain_ms=value / 100 * view.wall_ms(), advice=advice,
        )
    ]  # fmt: skip


# what the host did while the device idled (view.idle_host's causes): how the summary says
# it, and the advice for it
IDLE_CAUSES = {
    "loader": ("waiting for the DataLoader's next batch",
               "Load ahead of the device: DataLoader(num_workers=4 or more, pin_memory=True, "
               "persistent_workers=True, prefetch_factor=2); move decoding and augmentation to "
               "the workers or the device; check the file system the data is read from."),
    "optimizer": ("in the optimizer's step",
                  "The optimizer's step runs on the host while the device waits: a fused or "
                  "foreach optimizer (torch.optim.AdamW(fused=True)); for a preconditioned "
                  "one (Shampoo, K-FAC), update the preconditioner every N steps and keep its "
                  "work on the device; torch.compile the step, or capture it in a CUDA graph."),
    "sync": ("waiting for the device in a sync",
             "Remove .item(), .cpu(), print(tensor) and explicit synchronize() from the step, "
             "or do them every N steps; keep metrics on the device; copy to the host with "
             "non_blocking=True into pinned memory and read it a step later."),
    "first_launch": ("in a first launch that loads its kernel's code",
                     "A first launch loads its module or compiles its kernel once: profile "
                     "after a warm-up step (torch.profiler.schedule(wait=1, warmup=1, "
                     "active=3)), so one-time costs stay out of the recorded steps."),
    "alloc": ("allocating or freeing device memory",
              "Let the caching allocator keep its blocks: no torch.cuda.empty_cache() in the "
              "loop, static shapes (pad variable lengths to a few buckets), "
              "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."),
    "launch": ("launching kernels one by one",
               "Fewer, larger kernels: torch.compile (fusion), CUDA/XPU graphs "
               "(torch.cuda.graphs, mode='reduce-overhead'), foreach/fused optimizers, a "
               "larger batch."),
    "ops": ("in its own ops",
            "The host's own ops hold the device back: move that work off the step's path "
            "(into the DataLoader's workers, or every N steps), or let torch.compile fuse it "
            "into the device's work."),
    "untraced": ("in time no traced op covers (Python between ops, garbage collection, I/O)",
                 "The host's time is in no traced op: Python between the ops, garbage "
                 "collection, logging or I/O. Record it with with_stack=True (or py-spy) to "
                 "see where; gc.freeze() after setting up, log and checkpoint every N steps or "
                 "from another thread."),
}  # fmt: skip


def idle_cause(view: RunView, ranks: list[int], cells: int,
               evidence: dict) -> tuple[str | None, str, str | None]:  # fmt: skip
    """What the host did while the device of ``ranks`` idled in the rules' rows
    (:mod:`~hpcprof_kit.traces.view.idle_host`, kept in the signals): the cause that held
    most of the idle, the words the summary adds and its advice (None, "" and None when the
    signals lack it, a summary of an older kit). Adds the idle ms a step by cause (each the
    median over the steps) and the innermost host ops (their mean ms a step) to
    ``evidence``."""
    from hpcprof_kit.traces.view.idle_host import CAUSES, innermost_by_cause

    if "idle_untraced_ns" not in view.sig:
        return None, "", None
    mine = view.per_step("idle_untraced_ns").index.get_level_values("rank").isin(ranks)
    if not mine.any():
        return None, "", None
    n = max(1, cells)
    # each cause's median over the ranks' steps, as the host-side rules measure theirs
    ms = {c: float(view.per_step(f"idle_{c}_ns")[mine].median()) / 1e6 for c in CAUSES}
    total = sum(ms.values())
    if total <= 0:
        return None, "", None
    evidence["host_during_idle_ms_per_step"] = {c: round(v, 3) for c, v in ms.items() if v > 0}
    by_cause = innermost_by_cause(view.per_step_text("idle_host_ops")[mine])
    ops: dict[str, int] = {}
    for held in by_cause.values():
        for name, ns in held.items():
            ops[name] = ops.get(name, 0) + ns
    top = sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    evidence["innermost_host_ops_during_idle"] = [
        {"name": k, "ms_per_step": round(v / n / 1e6, 3)} for k, v in top]  # fmt: skip
    ranked = sorted(CAUSES, key=lambda c: -ms[c])  # ties: the first in CAUSES' order
    cause = ranked[0]
    # a cause under half the idle shares the advice with the next one from a fifth on
    named = ranked[:2] if ms[cause] < 0.5 * total and ms[ranked[1]] >= 0.2 * total else [cause]
    parts = []
    for c in named:
        held = by_cause.get(c, {})
        most = (f", most in {min(held.items(), key=lambda kv: (-kv[1], kv[0]))[0]}"
                if held and c != "untraced" else "")  # fmt: skip
        parts.append(f"{IDLE_CAUSES[c][0]}: {ms[c]:.1f} ms a step "
                     f"({100 * ms[c] / total:.0f} %){most}")  # fmt: skip
    said = "; the host meanwhile is mostly " + "; then ".join(parts)
    advice = " ".join(IDLE_CAUSES[c][1] for c in named)
    evidence["idle_cause"] = named
    return cause, said, advice


def events_missing(view: RunView, ranks: list[int], cause: str | None,
                   evidence: dict) -> str | None:  # fmt: skip
    """Why the device's idle cannot be judged on ``ranks``, or None: most of it falls in time
    no traced op covers (``cause`` "untraced"), and each rank's op ids say its trace dropped
    most of its events (:mod:`~hpcprof_kit.traces.view.op_ids`: a cut or sampled copy), so
    the kernels of that time are missing, not absent."""
    from hpcprof_kit.traces.view.op_ids import lost_events

    if cause != "untraced":
        return None
    holes = [view.op_ids.get(int(r)) for r in ranks]
    if not all(lost_events(h) for h in holes):
        return None
    kept = sum(h["ops"] for h in holes)
    span = sum(h["span"] for h in holes)
    ms = evidence.get("host_during_idle_ms_per_step", {}).get("untraced", 0.0)
    return (
        f"not judged: the device of rank(s) {', '.join(str(r) for r in ranks)} shows nothing "
        f"for most of the step, but its host shows no op either for {ms:.1f} ms a step, and "
        f"its ops hold {kept} of the {span} ids in their range, the rest in a few large "
        "holes: the trace dropped most of its events (a cut or sampled copy), so idle "
        "cannot be told from missing; report on the whole trace"
    )


def _idle_after_startup(view: RunView, spans: pd.DataFrame) -> list[dict]:
    """On a trace without steps: the device's idle share of the steady state, start-up (to
    the first device event) set apart and named; no gain per step."""
    per = steady_device_idle(spans)
    hot = per[per >= RULES["device_idle_host_bound"].threshold]
    if hot.empty:
        return []
    value = float(hot.max())
    mine = spans.loc[hot.index]
    evidence = {
        "device_idle_share_pct_by_rank": {int(r): round(float(v), 2) for r, v in hot.items()},
        "startup_ms_by_rank": {
            int(r): round((int(x["steady_ns"]) - int(x["start_ns"])) / 1e6, 3)
            for r, x in mine.iterrows()
        },  # fmt: skip
        "longest_startup_call": {
            int(r): {"name": x["longest_call"], "ms": round(int(x["longest_call_ns"]) / 1e6, 3)}
            for r, x in mine.iterrows()
            if x["longest_call"]
        },  # fmt: skip
    }
    startup_ms = max(evidence["startup_ms_by_rank"].values())
    cause, said, advice = idle_cause(view, list(hot.index), len(hot), evidence)
    cut = events_missing(view, list(hot.index), cause, evidence)
    if cut:
        view.coverage["device_idle_host_bound"] = cut
        return []
    advice = advice or RULES["device_idle_host_bound"].advice
    return [
        finding(
            "device_idle_host_bound", hot.index, [], value,
            f"the device of rank(s) {', '.join(str(r) for r in hot.index)} does nothing for "
            f"{value:.1f} % of the trace after start-up, while the host works or waits (the "
            f"trace has no steps; its start-up, {startup_ms:.1f} ms to the first device event, "
            f"is set apart){said}",
            evidence, advice=f"{WARMUP_ADVICE} {advice}",
        )
    ]  # fmt: skip


# % of step: on a device, a wait under its rule's threshold still counts from here when its
# ms beat the step-to-step spread itself (a clean run's DataLoader hand-off is ~2 % at most)
SHARE_FLOOR = 3.0


def device_wait(view: RunView, kind: str, column: str | pd.Series):
    """``share_rule`` of ``kind`` at its threshold, else, on a device, from ``SHARE_FLOOR``
    with the stricter noise test (:meth:`~.base.RunView.stands_out`): other problems (a slow
    DataLoader, host work after ``.item()``, fp32 GEMMs) lengthen the step and shrink a
    wait's share of it, not the ms it costs. Returns (hit or None, the floor or None)."""
    hit = share_rule(view, kind, column)
    if hit is not None or not view.on_device:
        return hit, None
    return share_rule(view, kind, column, floor=SHARE_FLOOR), SHARE_FLOOR


def waited(kind: str, view: RunView, hit, floor, summary: str, evidence: dict) -> list[dict]:
    """The finding of a :func:`device_wait` hit: its gain is the wait, and a hit from the
    floor says so in its summary and states the floor as its threshold."""
    value, effect, ranks, steps = hit
    if floor is not None:
        summary += under_threshold(view, kind, effect, evidence)
    return [finding(kind, ranks, steps, value, summary, evidence, gain_ms=effect,
                    threshold=floor)]  # fmt: skip


def under_threshold(view: RunView, kind: str, effect_ms: float, evidence: dict) -> str:
    """The words a finding from the floor adds to its summary (and the spread to its
    evidence): why a share under the threshold is still named."""
    spread = max(view.spread_ms or 0.0, view.step_noise_ms)
    evidence["step_spread_ms"] = round(spread, 3)
    return (f"; under the {RULES[kind].threshold:g} % threshold of a step that other work "
            f"lengthens, but {effect_ms:.1f} ms a step beat 3 x the step-to-step spread "
            f"({spread:.2f} ms)")  # fmt: skip


@rule(
    "data_loading",
    definition="the device idles while the host waits for the DataLoader (its ``__next__``): "
    "that idle time, median over the rank's steps, % of wall (a CPU-only run: the time in "
    "the DataLoader)",
    threshold=5.0,
    unit="% of step",
    noise="its ms per step beat 3 x the run's step-to-step spread. On a device, a share "
    "from 3 % on counts when its ms beat 3 x the step-to-step spread itself (four steps or "
    "more): other problems lengthen the step, not the wait",
    advice="Load ahead of the device: DataLoader(num_workers=4 or more, pin_memory=True, "
    "persistent_workers=True, prefetch_factor=2); move decoding and augmentation to the "
    "workers or the device; check the file system the data is read from.",
    needs=("sig:loader_idle_ns",),
)
def data_loading(view: RunView) -> list[dict]:
    hit, floor = device_wait(view, "data_loading", "loader_idle_ns")
    if hit is None:
        return []
    value, effect, ranks, steps = hit
    evidence: dict[str, Any] = {
        "device_idle_while_loading_ms_per_step": round(effect, 3),
        "loader_ms_per_step": round(float(view.per_step("loader_ns").median()) / 1e6, 3),
    }
    summary = (f"the {'device' if view.on_device else 'training'} waits {effect:.1f} ms a "
               f"step ({value:.1f} %) for the host to fetch the next batch from the DataLoader")  # fmt: skip
    return waited("data_loading", view, hit, floor, summary, evidence)


@rule(
    "synchronize_in_step",
    definition="device idle after host calls that wait for it inside steps (device syncs, "
    "``.item()``, queue waits) while it still had work, until the host launches again "
    "(median, % of wall)",
    threshold=5.0,
    unit="% of step",
    noise="a call on a device already drained is not counted; its ms per step beat 3 x the "
    "run's step-to-step spread",
    advice="Remove .item(), .cpu(), print(tensor) and explicit synchronize() from the step, or "
    "do them every N steps; keep metrics on the device.",
    needs=("steps", "device", "sig:sync_idle_ns"),
    no_device=".item() on a CPU tensor waits for no device, so the sync itself costs nothing; "
    "the host work around it is step time like any other (the breakdown's host part, the "
    "operators pane)",
)
def synchronize_in_step(view: RunView) -> list[dict]:
    calls = view.per_step("sync_calls")
    if not calls.any():
        return []
    share = view.share("sync_idle_ns")[calls > 0].dropna()
    if share.empty:
        return []
    value = float(share.groupby(level="step").median().median())
    effect = float(view.per_step("sync_idle_ns")[calls > 0].median()) / 1e6
    if value < RULES["synchronize_in_step"].threshold or not view.beats_noise(effect):
        return []
    evidence: dict[str, Any] = {
        "sync_calls": int(calls.sum()),
        "device_idle_after_ms": round(float(view.per_step("sync_idle_ns").sum()) / 1e6, 3),
    }
    gaps = view.gaps
    if gaps is not None and len(gaps):
        names = gaps.groupby("name")[["dur_ns", "idle_after_ns"]].agg(["count", "sum"])
        names = names.sort_values(("idle_after_ns", "sum"), ascending=False).head(3)
        evidence["calls"] = {
            str(n): {
                "calls": int(r[("dur_ns", "count")]),
                "host_wait_ms": round(float(r[("dur_ns", "sum")]) / 1e6, 3),
            }
            for n, r in names.iterrows()
        }
    summary = (f"after synchronisation calls inside the step the device sits idle for "
               f"{value:.1f} % of the step (median) until the host launches again")  # fmt: skip
    inside = _calling_ops(view.df, gaps)
    if inside:  # evidence only: a report from per-rank summaries has no events to say it
        evidence["called_from"] = inside
    return [
        finding(
            "synchronize_in_step", share.index.get_level_values("rank"),
            [s for s in share.index.get_level_values("step") if s >= 0], value, summary,
            evidence, gain_ms=effect,
        )
    ]  # fmt: skip


def _calling_ops(df, gaps, top: int = 3) -> dict[str, int]:
    """The outermost host op around each counted sync call (``aten::to`` for a batch copied
    without ``non_blocking``, ``aten::item`` for ``.item()``), with how many calls each holds:
    what in the step made it wait."""
    if df is None or gaps is None or not len(gaps) or "ts_ns" not in gaps:
        return {}
    counted = gaps[gaps["idle_after_ns"] > 0]
    if counted.empty:
        return {}
    df = bare(df)
    ops = df[text_test(df["cat"], lambda s: s.eq("cpu_op")) & (df["step"].to_numpy() >= 0)]
    names: dict[str, int] = {}
    for rank, mine in counted.groupby("rank"):
        theirs = ops[ops["rank"].to_numpy() == rank]
        lo = theirs["ts_ns"].to_numpy(dtype=np.int64)
        hi = lo + theirs["dur_ns"].to_numpy(dtype=np.int64)
        label = theirs["name"].astype(str).to_numpy()
        for ts in mine["ts_ns"].to_numpy(dtype=np.int64):
            around = np.flatnonzero((lo <= ts) & (ts < hi))
            if around.size:  # the longest one around it is the outermost
                name = str(label[around[np.argmax(hi[around] - lo[around])]])
                names[name] = names.get(name, 0) + 1
    return dict(sorted(names.items(), key=lambda kv: -kv[1])[:top])


CPU_LAUNCH_ADVICE = (
    "Fewer, larger ops: vectorise the Python loop into whole-tensor ops (one op over all the "
    "elements instead of one per element or per iteration); give the optimizer foreach=True "
    "or fused=True (on the CPU torch defaults to a loop over the parameters, a few tiny ops "
    "each); torch.compile the loop so it runs as one fused kernel; a larger batch spreads the "
    "per-op overhead."
)
TINY_OPS = 100  # on the CPU: fewer tiny ops a step are the ordinary glue of a training step


@rule(
    "launch_bound",
    definition="the device idle just before tiny kernels (under 20 µs, after a gap under "
    "0.5 ms in which none of the device's streams ran: collectives and copies keep it busy): "
    "kernels paced by their launches, not their work; by time, median % of wall, never more "
    "than the step's device idle. "
    "On a CPU-only run, where the ops are the work: the host time in outermost aten ops "
    "whose median call is under 25 µs (their dispatch, not their arithmetic) and the Python "
    "between them",
    threshold=5.0,
    unit="% of step",
    noise="its ms per step beat 3 x the run's step-to-step spread; 20 tiny kernels or more "
    "(on the CPU: 100 tiny ops or more) a step. On a device, a share from 3 % on counts when "
    "its ms beat 3 x the step-to-step spread itself (four steps or more): other problems "
    "lengthen the step, not what the launches cost",
    advice="Fewer, larger kernels: torch.compile (fusion), CUDA/XPU graphs "
    "(torch.cuda.graphs, mode='reduce-overhead'), foreach/fused optimizers "
    "(torch.optim.AdamW(fused=True)), a larger batch.",
)
def launch_bound(view: RunView) -> list[dict]:
    why = lacks(view, "launch_idle_ns" if view.on_device else "tiny_op_ns")
    why = why or device_events_missing(view)  # no CPU advice to a device run
    if why is not None:
        view.coverage["launch_bound"] = why
        return []
    return _launch_bound_device(view) if view.on_device else _launch_bound_host(view)


def launch_idle(view: RunView) -> tuple[pd.Series, pd.Series]:
    """Per (rank, step) of the rules' rows: the device idle just before tiny kernels (ns) and
    how many such kernels, the device counted busy while any of its streams runs
    (:func:`~hpcprof_kit.traces.analyses.launch_pacing.launch_gaps`, in the signals), and
    never more than the step's measured device idle (its ``host`` and ``idle`` parts)."""
    ns, count = view.per_step("launch_idle_ns"), view.per_step("tiny_kernels")
    rows = view.rows.set_index(["rank", "step"])
    idle = (rows["host_ns"] + rows["idle_ns"]).astype(float)
    return ns.clip(upper=idle.reindex(ns.index).fillna(0)), count


def _launch_bound_device(view: RunView) -> list[dict]:
    idle, count = launch_idle(view)
    if float(count.median()) < 20:
        return []
    hit, floor = device_wait(view, "launch_bound", idle)
    if hit is None:
        return []
    value, effect, ranks, steps = hit
    evidence: dict[str, Any] = {
        "tiny_kernels_per_step": int(count.median()),
        "device_idle_between_them_ms_per_step": round(effect, 3),
    }
    summary = (f"{evidence['tiny_kernels_per_step']} tiny kernels a step leave the device idle "
               f"{effect:.1f} ms ({value:.1f} %) between them, waiting for their launches")  # fmt: skip
    return waited("launch_bound", view, hit, floor, summary, evidence)


def _launch_bound_host(view: RunView) -> list[dict]:
    """The CPU twin: a step whose time goes to many tiny host ops, each its dispatch."""
    if float(view.per_step("tiny_ops").median()) < TINY_OPS:
        return []
    hit = share_rule(view, "launch_bound", "tiny_op_ns")
    if hit is None:
        return []
    value, effect, ranks, steps = hit
    evidence: dict[str, Any] = {
        "tiny_ops_per_step": int(view.per_step("tiny_ops").median()),
        "host_ms_in_them_per_step": round(effect, 3),
    }
    if view.df is not None:
        evidence["ops"] = tiny_op_names(view.df, ranks)
    return [
        finding(
            "launch_bound", ranks, steps, value,
            f"{evidence['tiny_ops_per_step']} tiny host ops a step (under 25 µs a call) take "
            f"{effect:.1f} ms ({value:.1f} %) of the step: the time goes to dispatching ops, "
            "not to their work",
            evidence, gain_ms=effect, advice=CPU_LAUNCH_ADVICE,
        )
    ]  # fmt: skip


def tiny_op_names(df: pd.DataFrame, ranks: list[int], top: int = 3) -> list[dict]:
    """The names of the tiny outermost host ops of ``ranks`` inside steps, most frequent
    first, with their count."""
    import numpy as np

    from hpcprof_kit.traces.view.host_signals import tiny_ops

    df = bare(df)
    rank = df["rank"].to_numpy(dtype=np.int64)
    rows, _, tiny = tiny_ops(df, rank, df["device"].to_numpy() >= 0, np.asarray(ranks))
    rows = rows[tiny & (df["step"].to_numpy()[rows] >= 0)]
    names = df["name"].astype(str).to_numpy()[rows]
    counts = sorted(zip(*np.unique(names, return_counts=True), strict=True),
                    key=lambda nc: (-nc[1], nc[0]))  # fmt: skip
    return [{"name": str(n), "count": int(c)} for n, c in counts[:top]]


@rule(
    "short_kernels",
    definition="time in kernels shorter than 10 µs, % of all compute-kernel time; counted "
    "only when 20 or more and their time is 1 % of the steps or more",
    threshold=50.0,
    unit="% of kernel time",
    noise="by time, not count: a thousand 3 µs kernels in a second-long run are not a finding",
    advice="Fuse small kernels (torch.compile), use a larger batch, or capture the step with "
    "CUDA/XPU graphs so launches stop dominating.",
    needs=("device", "sig:kernel_ns"),
)
def short_kernels(view: RunView) -> list[dict]:
    sig = view.sig
    kernels, short = int(sig["kernels"].sum()), int(sig["short_kernels"].sum())
    short_ns, kernel_ns = float(sig["short_ns"].sum()), float(sig["kernel_ns"].sum())
    wall = float(view.rows["wall_ns"].sum())
    if short < 20 or kernel_ns <= 0 or wall <= 0 or short_ns < 0.01 * wall:
        return []
    value = 100.0 * short_ns / kernel_ns
    if value < RULES["short_kernels"].threshold:
        return []
    return [
        finding(
            "short_kernels", sorted(sig.loc[sig["kernels"] > 0, "rank"].unique()), [], value,
            f"{value:.0f} % of the kernel time is in {short} kernels under 10 µs "
            f"(of {kernels})",
            {"kernels": kernels, "short": short, "short_total_ms": round(short_ns / 1e6, 3)},
            gain_ms=None,
        )
    ]  # fmt: skip
