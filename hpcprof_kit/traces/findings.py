"""Findings: what looks wrong with a run, the number that says so, the events behind it, and
what to try. Every rule is deterministic and reads only the trace table and the analyses made
of it, so the same trace always gives the same findings.

The vocabulary (``kind``), each with the value it measures and its threshold:

=========================  ==============================================================  ==========
kind                       value                                                           threshold
=========================  ==============================================================  ==========
``straggler``              what the straggler costs the others per step (median, % of     5 %
                           the step's wall time); the same rank in at least half the steps
``exposed_communication``  communication even the last rank to arrive waits for: each      10 %
                           step's smallest exposed comm across ranks (median, % of wall)
``device_idle_host_bound`` the device does nothing while the host works or nothing runs   10 %
                           (``host`` + ``idle`` parts of the step, median, % of wall)
``short_kernels``          kernels shorter than 10 µs, % of all device kernels             50 %
``synchronize_in_step``    device idle after host calls that wait for it inside steps      5 %
                           (device syncs, ``.item()``, queue waits; median, % of wall)
``graph_breaks``           compiled regions per step (``Torch-Compiled Region: f/r``);     1
                           a recompile (``r`` > 0) is named in the evidence
``no_warmup``              the first recorded step's wall time against the median of the   1.5 x
                           others (three steps or more)
``one_rank_only``          ranks traced, against the world size the trace records          1 rank
``step_variance``          (p90 - p10) / median of a rank's step wall times, after a       20 %
                           warmup outlier is set aside (four steps or more)
=========================  ==============================================================  ==========

A finding is a dict: ``kind``, ``ranks``, ``steps``, ``value``, ``threshold``, ``unit``,
``summary`` (one sentence), ``evidence`` (the events and numbers behind it) and ``advice``.

>>> FINDING_KINDS[:3]
('straggler', 'exposed_communication', 'device_idle_host_bound')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from hpcprof_kit.traces.breakdown import bare, busy_and_wait, text_test

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

FINDING_KINDS = (
    "straggler",
    "exposed_communication",
    "device_idle_host_bound",
    "short_kernels",
    "synchronize_in_step",
    "graph_breaks",
    "no_warmup",
    "one_rank_only",
    "step_variance",
)
THRESHOLDS = {
    "straggler": 5.0,
    "exposed_communication": 10.0,
    "device_idle_host_bound": 10.0,
    "short_kernels": 50.0,
    "synchronize_in_step": 5.0,
    "graph_breaks": 1,
    "no_warmup": 1.5,
    "one_rank_only": 1,
    "step_variance": 20.0,
}
SHORT_KERNEL_NS = 10_000
# host calls that wait for the device: CUDA / HIP syncs, Level Zero / UR waits, .item()
SYNC_NAMES = (
    r"^(?:cuda|hip)(?:Device|Stream|Event)Synchronize$|^urQueueFinish$|^urEventWait$"
    r"|^zeEventHostSynchronize$|^zeCommandQueueSynchronize$|^aten::_local_scalar_dense$"
)
COMPILED_REGION = "Torch-Compiled Region: "


def _finding(kind: str, ranks, steps, value: float, unit: str, summary: str, evidence, advice):
    return {
        "kind": kind,
        "ranks": [int(r) for r in ranks],
        "steps": [int(s) for s in steps],
        "value": round(float(value), 3),
        "threshold": THRESHOLDS[kind],
        "unit": unit,
        "summary": summary,
        "evidence": evidence,
        "advice": advice,
    }


def _pct(part: np.ndarray, wall: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(wall > 0, 100.0 * part / np.where(wall > 0, wall, 1), 0.0)


def stepped(b: pd.DataFrame) -> pd.DataFrame:
    """The rows of a breakdown that are real ``ProfilerStep`` steps (not a whole-trace step)."""
    return b[b["step"].to_numpy() >= 0]


def straggler(
    b: pd.DataFrame, steps: pd.DataFrame, df: pd.DataFrame | None, slower=None
) -> list[dict]:
    """The rank the others wait for, when it is the same rank in at least half the steps and
    costs them 5 % of the step or more; the evidence names its slowest kernels or ops (from
    ``df``, or ``slower(rank)`` when there is no table)."""
    named = steps["straggler"].to_numpy()
    ranks = sorted({int(r) for r in named if r >= 0})
    if not ranks or b["rank"].nunique() < 2:
        return []
    counts = {r: int((named == r).sum()) for r in ranks}
    rank = max(ranks, key=lambda r: (counts[r], -r))
    if counts[rank] * 2 < len(steps):
        return []
    mine = named == rank
    wall = b.groupby("step")["wall_ns"].median().reindex(steps.index).to_numpy(dtype=float)
    cost_pct = _pct(steps["cost_ms"].to_numpy(dtype=float)[mine] * 1e6, wall[mine])
    value = float(np.median(cost_pct))
    if value < THRESHOLDS["straggler"]:
        return []
    busy, wait = busy_and_wait(b)
    per = b.assign(busy=busy / 1e6, wait=wait / 1e6).groupby("rank")[["busy", "wait"]].median()
    others = per.drop(index=rank)
    slower = slower_names(df, rank) if df is not None else (slower(rank) if slower else [])
    evidence = {
        "straggler_steps": f"{counts[rank]} of {len(steps)}",
        "cost_ms_per_step": round(float(np.median(steps["cost_ms"].to_numpy()[mine])), 3),
        "worked_before_waiting_ms": round(float(per.loc[rank, "busy"]), 3),
        "median_other_rank_worked_ms": round(float(others["busy"].median()), 3),
        "its_exposed_comm_ms": round(float(per.loc[rank, "wait"]), 3),
        "median_other_rank_exposed_comm_ms": round(float(others["wait"].median()), 3),
        "slower_than_median_rank": slower,
    }
    what = f"; slowest against the other ranks: {slower[0]['name']}" if slower else ""
    return [
        _finding(
            "straggler",
            [rank],
            steps.index[mine],
            value,
            "% of step",
            f"rank {rank} works {evidence['cost_ms_per_step']} ms a step longer than the median "
            f"rank before the collective, and the other ranks wait that long for it{what}",
            evidence,
            f"Put rank {rank} beside a typical rank on the timeline "
            f"(traces.plot_timeline(df, ranks=[{rank}, ...])); compare its kernels with "
            "traces.same_name; check its CPU binding and GPU (notebook 07), its node, and "
            "whether its data shard is larger.",
        )
    ]


def slower_names(df: pd.DataFrame, rank: int, top: int = 3) -> list[dict[str, Any]]:
    """The kernels (or, on a CPU-only trace, the ops) that are slowest on ``rank`` against
    the median of the other ranks: ``name``, ``rank_median_us``, ``others_median_us``,
    ``ratio``; the ``top`` largest ratios above 1.1, each name seen on ``rank`` and others."""

    df = bare(df)
    kernels = text_test(df["track"], lambda s: s == "gpu") & (df["device"].to_numpy() >= 0)
    rows = kernels if kernels.any() else text_test(df["cat"], lambda s: s == "cpu_op")
    sub = df[rows & (df["dur_ns"].to_numpy() > 0)]
    if sub.empty:
        return []
    med = sub.groupby([sub["name"].astype(str), sub["rank"]], observed=True)["dur_ns"].median()
    return slower_than_others(med.unstack("rank") / 1e3, rank, top)


def slower_than_others(med_us: pd.DataFrame, rank: int, top: int = 3) -> list[dict[str, Any]]:
    """From a names x ranks table of median durations (µs): the ``top`` names whose median on
    ``rank`` is most above the other ranks' median (ratio above 1.1; ties by name)."""
    import pandas as pd

    if rank not in med_us.columns or med_us.shape[1] < 2:
        return []
    others = med_us.drop(columns=rank).median(axis=1)
    ratio = (med_us[rank] / others).dropna()
    ratio = ratio[ratio > 1.1]
    table = pd.DataFrame({"ratio": ratio.to_numpy(), "name": list(ratio.index)})
    table = table.sort_values(["ratio", "name"], ascending=[False, True])
    return [
        {
            "name": str(name),
            "rank_median_us": round(float(med_us.loc[name, rank]), 3),
            "others_median_us": round(float(others.loc[name]), 3),
            "ratio": round(float(r), 3),
        }
        for name, r in zip(table["name"].head(top), table["ratio"].head(top), strict=True)
    ]


def exposed_communication(b: pd.DataFrame, world: int = 1) -> list[dict]:
    """Communication that even the last rank to arrive waits for: not a straggler's cost but
    the collective itself, left without compute to hide behind."""
    b = stepped(b)
    if b.empty or not (b["exposed_comm_ns"] > 0).any():
        return []
    share = _pct(b["exposed_comm_ns"].to_numpy(dtype=float), b["wall_ns"].to_numpy(dtype=float))
    least = b.assign(share=share).groupby("step")["share"].min()
    value = float(least.median())
    if value < THRESHOLDS["exposed_communication"]:
        return []
    hidden = b["hidden_comm_ns"].sum() / max(
        1, b["hidden_comm_ns"].sum() + b["exposed_comm_ns"].sum()
    )
    evidence = {
        "least_exposed_share_pct_per_step": {int(s): round(float(v), 2) for s, v in least.items()},
        "exposed_comm_ms_median": round(float(b["exposed_comm_ns"].median()) / 1e6, 3),
        "hidden_share_of_comm_pct": round(100 * float(hidden), 2),
    }
    traced = int(b["rank"].nunique())
    caveat = (
        f" (only {traced} of {world} ranks traced: part of it may be waiting for an untraced "
        "straggler)"
        if traced < world
        else ""
    )
    return [
        _finding(
            "exposed_communication",
            sorted(b["rank"].unique()),
            least.index[least >= THRESHOLDS["exposed_communication"]],
            value,
            "% of step",
            f"every rank, even the last to arrive, waits for communication with nothing to "
            f"overlap it: {value:.1f} % of the step (median){caveat}",
            evidence,
            "Let DDP overlap the all-reduce with backward (bucket_cap_mb, "
            "gradient_as_bucket_view=True, no_sync() for gradient accumulation); check the "
            "communication library's settings for the network; fewer, larger collectives.",
        )
    ]


def device_idle_host_bound(b: pd.DataFrame, df: pd.DataFrame | None) -> list[dict]:
    """Device ranks whose device does nothing for 10 % of a step or more while the host
    works (data loading, launches) or nothing at all runs."""
    b = stepped(b)
    b = b[b["kind"] == "device"]
    if b.empty:
        return []
    wall = b["wall_ns"].to_numpy(dtype=float)
    share = _pct(b["host_ns"].to_numpy(dtype=float) + b["idle_ns"].to_numpy(dtype=float), wall)
    per = b.assign(share=share).groupby("rank")["share"].median()
    out = []
    hot = per[per >= THRESHOLDS["device_idle_host_bound"]]
    if hot.empty:
        return []
    rows = b[b["rank"].isin(hot.index)]
    evidence = {
        "device_idle_share_pct_by_rank": {int(r): round(float(v), 2) for r, v in hot.items()},
        "other_ranks_median_pct": round(float(per.drop(index=hot.index).median()), 2)
        if len(per) > len(hot)
        else None,
        "host_ops_during_idle": host_ops_in_steps(df, rows) if df is not None else None,
    }
    out.append(
        _finding(
            "device_idle_host_bound",
            hot.index,
            sorted(rows["step"].unique()),
            float(hot.max()),
            "% of step",
            f"the device of rank(s) {', '.join(str(r) for r in hot.index)} does nothing for "
            f"{float(hot.max()):.1f} % of the step while the host works or waits",
            evidence,
            "Feed the device: DataLoader(num_workers>0, pin_memory=True, persistent_workers), "
            "non_blocking copies, prefetching; a launch-bound loop gains from torch.compile "
            "or CUDA/XPU graphs and a larger batch.",
        )
    )
    return out


def host_ops_in_steps(df: pd.DataFrame, rows: pd.DataFrame, top: int = 3) -> list[dict]:
    """The longest host ops (``cpu_op``, not nested in another) of ``rows``' ranks and steps,
    with their total time: what the host did while the device waited."""
    df = bare(df)
    ops = df[
        text_test(df["cat"], lambda s: s.isin(("cpu_op", "user_annotation")))
        & ~text_test(df["name"], lambda s: s.str.startswith("ProfilerStep#"))
        & (df["device"].to_numpy() < 0)
    ]
    ops = ops[ops["rank"].isin(rows["rank"].unique()) & ops["step"].isin(rows["step"].unique())]
    if ops.empty:
        return []
    total = ops.groupby(ops["name"].astype(str))["dur_ns"].sum().sort_values(ascending=False)
    return [{"name": n, "total_ms": round(float(v) / 1e6, 3)} for n, v in total.head(top).items()]


SIGNAL_COLUMNS = ["rank", "step", "kernels", "short_kernels", "short_ns", "sync_idle_ns",
                  "sync_calls", "regions", "region_names"]  # fmt: skip


def signals(df: pd.DataFrame, gaps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per rank and step (-1: outside every step) the event counts three rules read, small
    enough to keep in a rank's summary: device kernels and those under 10 µs (count, ns),
    the device idle after host syncs (:func:`sync_gaps`, a gap counted once) and their calls,
    and the distinct compiled regions (``Torch-Compiled Region: f/r``; their names joined by
    ``,``). Summed or combined over ranks, they give the numbers the rules give on the whole
    table, so a report made of per-rank summaries finds what a report of the table finds.
    """
    import pandas as pd

    df = bare(df)
    key = ["rank", "step"]
    rank, step = df["rank"].to_numpy(dtype=np.int64), df["step"].to_numpy(dtype=np.int64)
    parts = []
    gpu = text_test(df["track"], lambda s: s == "gpu") & (df["device"].to_numpy() >= 0)
    dur = df["dur_ns"].to_numpy(dtype=np.int64)
    k = pd.DataFrame({"rank": rank[gpu], "step": step[gpu], "dur": dur[gpu]})
    k["short"] = k["dur"] < SHORT_KERNEL_NS
    k["short_ns"] = np.where(k["short"], k["dur"], 0)
    parts.append(
        k.groupby(key).agg(kernels=("dur", "size"), short_kernels=("short", "sum"),
                           short_ns=("short_ns", "sum"))
    )  # fmt: skip
    gaps = sync_gaps(df) if gaps is None else gaps  # the caller's, when it has them
    if len(gaps):
        once = gaps.groupby([*key, "next_device_ns"])["idle_after_ns"].max()
        sync = once.groupby(level=key).sum().rename("sync_idle_ns").to_frame()
        sync["sync_calls"] = gaps.groupby(key).size()
        parts.append(sync)
    compiled = text_test(df["name"], lambda s: s.str.startswith(COMPILED_REGION))
    if compiled.any():
        names = df["name"][compiled].astype(str).str.slice(len(COMPILED_REGION))
        c = pd.DataFrame({"rank": rank[compiled], "step": step[compiled], "n": names.to_numpy()})
        regions = c.groupby(key)["n"].agg(lambda v: ",".join(sorted(set(v)))).rename("region_names")
        parts.append(regions.to_frame().assign(regions=c.groupby(key)["n"].nunique()))
    out = (
        pd.concat(parts, axis=1)
        if parts
        else pd.DataFrame(index=pd.MultiIndex.from_arrays([[], []], names=key))
    )
    out = out.reset_index()
    for col in SIGNAL_COLUMNS[2:-1]:
        out[col] = (out[col] if col in out else pd.Series(0, index=out.index)).fillna(0)
        out[col] = out[col].astype(np.int64)
    names = out["region_names"] if "region_names" in out else pd.Series("", index=out.index)
    out["region_names"] = names.fillna("").astype(str)
    return out[SIGNAL_COLUMNS].sort_values(key, kind="stable").reset_index(drop=True)


def kernel_rows(df: pd.DataFrame) -> np.ndarray:
    """Rows of device kernels, compute and communication, with a duration."""
    from hpcprof_kit.traces.ops import KERNEL_TRACKS  # what top_kernels counts as a kernel

    rows = text_test(df["track"], lambda s: s.isin(KERNEL_TRACKS))
    return rows & (df["device"].to_numpy() >= 0) & (df["dur_ns"].to_numpy() > 0)


def short_kernels(sig: pd.DataFrame) -> list[dict]:
    """Most device kernels last under 10 µs: launch overhead dominates them. ``sig`` is
    :func:`signals`."""
    kernels, short = int(sig["kernels"].sum()), int(sig["short_kernels"].sum())
    if kernels < 20:
        return []
    value = 100.0 * short / kernels
    if value < THRESHOLDS["short_kernels"]:
        return []
    return [
        _finding(
            "short_kernels",
            sorted(sig.loc[sig["kernels"] > 0, "rank"].unique()),
            [],
            value,
            "% of kernels",
            f"{value:.0f} % of the {kernels} device kernels last under 10 µs",
            {
                "kernels": kernels,
                "short": short,
                "short_total_ms": round(float(sig["short_ns"].sum()) / 1e6, 3),
            },
            "Fuse small kernels (torch.compile), use a larger batch, or capture the step "
            "with CUDA/XPU graphs so launches stop dominating.",
        )
    ]


def sync_gaps(df: pd.DataFrame) -> pd.DataFrame:
    """Each host call inside a step that waits for the device (``SYNC_NAMES``), with the time
    the device then sits idle until its next event (``idle_after_ns``): after a sync the
    queue is empty, and the device waits for the host to launch again. Columns ``rank, step,
    name, dur_ns, idle_after_ns, next_device_ns``; nested calls (``aten::item`` around
    ``cudaStreamSynchronize``) end before the same device event, and only the longest of them
    counts the gap (see :func:`synchronize_in_step`)."""
    import pandas as pd

    df = bare(df)
    rows = text_test(df["name"], lambda s: s.str.contains(SYNC_NAMES, regex=True))
    rows &= (df["step"].to_numpy() >= 0) & (df["device"].to_numpy() < 0)
    sync = df[rows]
    cols = ["rank", "step", "name", "dur_ns", "idle_after_ns", "next_device_ns"]
    if sync.empty:
        return pd.DataFrame([], columns=cols)
    on_device = text_test(df["track"], lambda s: s.isin(("gpu", "comm", "memcpy", "memset")))
    on_device &= df["device"].to_numpy() >= 0
    dev = df[on_device]
    idle = np.zeros(len(sync), dtype=np.int64)
    following = np.full(len(sync), -1, dtype=np.int64)
    ends = (sync["ts_ns"] + sync["dur_ns"]).to_numpy(dtype=np.int64)
    for rank in np.unique(sync["rank"].to_numpy()):
        mine = sync["rank"].to_numpy() == rank
        d = dev[dev["rank"].to_numpy() == rank]
        if d.empty:
            continue
        start = np.sort(d["ts_ns"].to_numpy(dtype=np.int64))
        busy_until = np.maximum.accumulate(
            (d["ts_ns"] + d["dur_ns"]).to_numpy(dtype=np.int64)[np.argsort(d["ts_ns"].to_numpy())]
        )
        at = np.searchsorted(start, ends[mine], side="right")
        covered = (at > 0) & (busy_until[np.maximum(at - 1, 0)] > ends[mine])
        nxt = np.where(at < start.size, start[np.minimum(at, start.size - 1)], ends[mine])
        idle[mine] = np.where(covered, 0, np.maximum(nxt - ends[mine], 0))
        following[mine] = nxt
    return pd.DataFrame(
        {
            "rank": sync["rank"].to_numpy(dtype=np.int64),
            "step": sync["step"].to_numpy(dtype=np.int64),
            "name": sync["name"].astype(str).to_numpy(),
            "dur_ns": sync["dur_ns"].to_numpy(dtype=np.int64),
            "idle_after_ns": idle,
            "next_device_ns": following,
        }
    )


def synchronize_in_step(sig: pd.DataFrame, b: pd.DataFrame, gaps=None) -> list[dict]:
    """Host calls that wait for the device inside steps, after which the device sits idle for
    5 % of the step or more (median over steps) until the host launches again. ``sig`` is
    :func:`signals`; ``gaps`` (:func:`sync_gaps`), when given, names the calls."""
    b = stepped(b)
    per = sig[(sig["step"] >= 0) & (sig["sync_calls"] > 0)].set_index(["rank", "step"])
    if per.empty or b.empty:
        return []
    wall = b.set_index(["rank", "step"])["wall_ns"]
    share = (100.0 * per["sync_idle_ns"] / wall.reindex(per.index)).dropna()
    if share.empty:
        return []
    value = float(share.groupby(level="step").median().median())
    if value < THRESHOLDS["synchronize_in_step"]:
        return []
    evidence: dict[str, Any] = {
        "sync_calls": int(per["sync_calls"].sum()),
        "device_idle_after_ms": round(float(per["sync_idle_ns"].sum()) / 1e6, 3),
    }
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
    return [
        _finding(
            "synchronize_in_step",
            sorted(share.index.get_level_values("rank").unique()),
            sorted(share.index.get_level_values("step").unique()),
            value,
            "% of step",
            f"after synchronisation calls inside the step the device sits idle for {value:.1f} "
            "% of the step (median) until the host launches again",
            evidence,
            "Remove .item(), .cpu(), print(tensor) and explicit synchronize() from the step, or "
            "do them every N steps; keep metrics on the device.",
        )
    ]


def graph_breaks(sig: pd.DataFrame) -> list[dict]:
    """More than one compiled region per step (graph breaks), or recompiles. ``sig`` is
    :func:`signals`."""
    per = sig[(sig["step"] >= 0) & (sig["regions"] > 0)]
    if per.empty:
        return []
    value = float(per["regions"].median())
    names = sorted({n for text in per["region_names"] for n in text.split(",") if n})
    recompiles = [n for n in names if "/" in n and n.split("/")[-1] not in ("0", "")]
    if value <= THRESHOLDS["graph_breaks"] and not recompiles:
        return []
    return [
        _finding(
            "graph_breaks",
            sorted(per["rank"].unique()),
            sorted(per["step"].unique()),
            value,
            "compiled regions per step",
            f"each step runs {value:.0f} compiled regions: the model graph breaks"
            + (f"; recompiled: {', '.join(recompiles)}" if recompiles else ""),
            {"regions": names, "recompiled": recompiles},
            "Find the breaks with TORCH_LOGS=graph_breaks (or torch._dynamo.explain); "
            "recompiles with TORCH_LOGS=recompiles; mark dynamic shapes or keep them static.",
        )
    ]


def no_warmup(b: pd.DataFrame) -> list[dict]:
    """The first recorded step of a rank is 1.5 x the median of its other steps or more."""
    b = stepped(b)
    out_ranks, ratios, steps = [], [], set()
    for rank, rows in b.groupby("rank"):
        wall = rows.sort_values("step")["wall_ns"].to_numpy(dtype=float)
        if wall.size < 3:
            continue
        ratio = wall[0] / float(np.median(wall[1:]))
        if ratio >= THRESHOLDS["no_warmup"]:
            out_ranks.append(rank)
            ratios.append(ratio)
            steps.add(int(rows["step"].min()))
    if not out_ranks:
        return []
    value = float(max(ratios))
    return [
        _finding(
            "no_warmup",
            out_ranks,
            sorted(steps),
            value,
            "x the median step",
            f"the first recorded step takes {value:.1f} x the others: it is not a steady step",
            {
                "first_step_ratio_by_rank": {
                    int(r): round(v, 2) for r, v in zip(out_ranks, ratios, strict=True)
                }
            },
            "Record after a warmup: torch.profiler.schedule(wait=1, warmup=1, active=N); leave "
            "the first step out of any comparison.",
        )
    ]


def world_size(meta: dict) -> int:
    """The largest world size the ranks' traces record (1 when none does); ``meta`` is the
    table's ``attrs["ranks"]``."""
    sizes = [m.get("world_size") for m in meta.values()]
    return int(max([s for s in sizes if s], default=1))


def one_rank_only(ranks: dict) -> list[dict]:
    """A multi-rank run of which one rank was traced: rank 0 is not the run. ``ranks`` is
    the table's ``attrs["ranks"]``."""
    world = world_size(ranks)
    if len(ranks) != 1 or world <= 1:
        return []
    rank = next(iter(ranks))
    return [
        _finding(
            "one_rank_only",
            [rank],
            [],
            1,
            "ranks traced",
            f"one rank (rank {rank}) of {world} was traced: stragglers, skew and the other "
            "ranks' waiting cannot be seen",
            {"world_size": int(world), "traced": [int(rank)]},
            "Trace every rank for a few steps (the kit's trace_ranks='all'), or at least a slow, "
            "a typical and a fast one; then compare them (traces.rank_steps).",
        )
    ]


def step_variance(b: pd.DataFrame, skip_first: set[int]) -> list[dict]:
    """Ranks whose step wall times vary by 20 % of their median or more (p90 - p10)."""
    b = stepped(b)
    hits, values, steps = [], [], set()
    for rank, rows in b.groupby("rank"):
        rows = rows.sort_values("step")
        if rank in skip_first:
            rows = rows.iloc[1:]
        wall = rows["wall_ns"].to_numpy(dtype=float)
        if wall.size < 4:
            continue
        p10, med, p90 = np.quantile(wall, [0.1, 0.5, 0.9])
        spread = 100.0 * (p90 - p10) / med if med > 0 else 0.0
        if spread >= THRESHOLDS["step_variance"]:
            hits.append(rank)
            values.append(spread)
            steps.update(int(s) for s in rows["step"][wall > med * 1.2])
    if not hits:
        return []
    value = float(max(values))
    return [
        _finding(
            "step_variance",
            hits,
            sorted(steps),
            value,
            "% of median step",
            f"step times vary by {value:.0f} % of the median (p10-p90): one step is not "
            "representative",
            {
                "p10_p90_pct_by_rank": {
                    int(r): round(v, 2) for r, v in zip(hits, values, strict=True)
                }
            },
            "Record more steps and compare medians with their spread; look for periodic "
            "work (checkpoints, logging, evaluation) and for other jobs on the node.",
        )
    ]


def find(
    df: pd.DataFrame, b: pd.DataFrame, steps: pd.DataFrame, meta: dict | None = None
) -> list[dict]:
    """Every finding of a run, in ``FINDING_KINDS`` order.

    ``b`` is ``step_breakdown(df)``, ``steps`` is ``rank_steps(b)`` and ``meta`` the per-rank
    metadata (``df.attrs["ranks"]``, the default).
    """
    meta = df.attrs.get("ranks", {}) if meta is None else meta
    gaps = sync_gaps(df)
    return find_in(b, steps, signals(df, gaps), meta, df, gaps=gaps)


def find_in(
    b: pd.DataFrame,
    steps: pd.DataFrame,
    sig: pd.DataFrame,
    meta: dict,
    df: pd.DataFrame | None = None,
    slower: Callable[[int], list[dict]] | None = None,
    gaps: pd.DataFrame | None = None,
) -> list[dict]:
    """The findings from a run's breakdown, ``rank_steps``, :func:`signals` and per-rank
    metadata: what a run summary holds. ``df``, the trace table when there is one, adds
    evidence (the host ops during device idle); ``gaps`` (:func:`sync_gaps` of ``df``) names
    the sync calls; ``slower(rank)`` stands in for the straggler's slower kernels when there
    is no table."""
    warm = no_warmup(b)
    skip = set(warm[0]["ranks"]) if warm else set()
    found = [
        *straggler(b, steps, df, slower),
        *exposed_communication(b, world_size(meta)),
        *device_idle_host_bound(b, df),
        *short_kernels(sig),
        *synchronize_in_step(sig, b, gaps),
        *graph_breaks(sig),
        *warm,
        *one_rank_only(meta),
        *step_variance(b, skip),
    ]
    return sorted(found, key=lambda f: FINDING_KINDS.index(f["kind"]))
