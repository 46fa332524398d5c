"""Rules on communication: collectives nothing hides, many latency-bound small ones, and bus
bandwidth far below the link's (nccl-tests' formulas: an all-reduce moves 2(n-1)/n of its
bytes over each rank's link).

>>> RULES["small_collectives"].threshold
20.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprof_kit.traces.findings.base import RULES, finding, pct, rule
from hpcprof_kit.traces.findings.ranks import world_size
from hpcprof_kit.traces.view import names as N
from hpcprof_kit.traces.view.run_view import RunView
from hpcprof_kit.traces.view.signals import BIG_COLL_BYTES, SMALL_COLL_BYTES, exposed_by_collective

if TYPE_CHECKING:  # pragma: no cover
    pass

FAR_BELOW = 0.15  # low bus bandwidth: under this share of what the link gives nccl-tests

# what to try for each collective nothing hides (NCCL's tests' names); DDP's settings reach
# only its gradient all-reduce
COLLECTIVE_ADVICE = {
    "allreduce": "Let DDP overlap the all-reduce with backward (bucket_cap_mb, "
    "gradient_as_bucket_view=True, no_sync() for gradient accumulation); check the "
    "communication library's settings for the network; fewer, larger collectives.",
    "alltoall": "An all-to-all (sharded embeddings' ids and pooled values, MoE's tokens) waits "
    "for every rank's slice, and DDP's bucket settings do not reach it: pipeline it behind "
    "the previous batch's compute (TorchRec's TrainPipelineSparseDist), balance the shards "
    "across ranks (the sharding planner's plan), send less (bf16/fp16 quantised comms, "
    "fewer or deduplicated ids); check the network with nccl-tests' alltoall_perf.",
    "allgather": "Prefetch the all-gathers so they overlap compute (FSDP's forward_prefetch=True "
    "and backward_prefetch=BACKWARD_PRE, limit_all_gathers); keep shard groups within a node "
    "(HSDP); an optimizer's own all-gather after backward (a distributed preconditioner, "
    "ZeRO's parameter gather) has nothing to hide behind: overlap it with the next step's "
    "forward or run it less often.",
    "reducescatter": "Overlap the reduce-scatter with backward (FSDP's backward_prefetch, "
    "ZeRO's overlap_comm); keep shard groups within a node (HSDP); fewer, larger buckets.",
}


@rule(
    "exposed_communication",
    definition="communication even the last rank to arrive waits for: each step's smallest "
    "exposed comm across ranks (median, % of wall)",
    threshold=10.0,
    unit="% of step",
    noise="the smallest rank's share is a floor, not a spread: a straggler cannot make it",
    advice="Let DDP overlap the all-reduce with backward (bucket_cap_mb, "
    "gradient_as_bucket_view=True, no_sync() for gradient accumulation); check the "
    "communication library's settings for the network; fewer, larger collectives.",
)
def exposed_communication(view: RunView) -> list[dict]:
    b = view.rows
    if b.empty or not (b["exposed_comm_ns"] > 0).any():
        return []
    # a step with no traced work cannot tell communication nothing hid from work the trace
    # lost (a sampled trace of collectives alone)
    b = b[b["compute_ns"] > 0]
    if b.empty:
        view.coverage["exposed_communication"] = (
            "could not run: the steps with communication hold no traced compute, so nothing "
            "tells what the communication could have overlapped"
        )
        return []
    share = pct(b["exposed_comm_ns"].to_numpy(dtype=float), b["wall_ns"].to_numpy(dtype=float))
    least = b.assign(share=share).groupby("step")["share"].min()
    value = float(least.median())
    if value < RULES["exposed_communication"].threshold:
        return []
    hidden = b["hidden_comm_ns"].sum() / max(
        1, b["hidden_comm_ns"].sum() + b["exposed_comm_ns"].sum()
    )
    evidence = {
        "least_exposed_share_pct_per_step": {int(s): round(float(v), 2) for s, v in least.items()},
        "exposed_comm_ms_median": round(float(b["exposed_comm_ns"].median()) / 1e6, 3),
        "hidden_share_of_comm_pct": round(100 * float(hidden), 2),
    }
    traced, world = int(b["rank"].nunique()), world_size(view.meta)
    # with ranks untraced, no traced rank is known to be the last to arrive
    who = ("every rank, even the last to arrive, waits" if traced >= world else
           f"the {'rank' if traced == 1 else f'{traced} ranks'} traced "
           f"wait{'s' if traced == 1 else ''}")  # fmt: skip
    caveat = (
        f" (only {traced} of {world} ranks traced: part of it may be waiting for an untraced "
        "straggler)"
        if traced < world
        else ""
    )
    import pandas as pd

    advice = None
    by = pd.Series(exposed_by_collective(view.per_step_text("coll_exposed")), dtype=float)
    by = (by[by > 0] / max(1, len(b)) / 1e6).sort_values(ascending=False, kind="stable")
    if len(by):
        evidence["exposed_ms_per_step_by_collective"] = {
            str(c) or "unknown": round(float(v), 3) for c, v in by.items()}  # fmt: skip
        top, ms = str(by.index[0]), float(by.iloc[0])
        if top in COLLECTIVE_ADVICE:  # the summary stays as the per-rank summaries give it
            each = f"{ms:.1f} ms" if ms >= 0.1 else f"{ms * 1e3:.0f} µs"
            advice = (f"Mostly {top} ({each} a rank and step, of the collectives nothing "
                      f"hid): {COLLECTIVE_ADVICE[top]}")  # fmt: skip
    return [
        finding(
            "exposed_communication", sorted(b["rank"].unique()),
            [s for s in least.index[least >= RULES["exposed_communication"].threshold] if s >= 0],
            value,
            f"{who} for communication with nothing to overlap it: {value:.1f} % of the step "
            f"(median){caveat}",
            evidence, gain_ms=value / 100 * view.wall_ms(), advice=advice,
        )
    ]  # fmt: skip


@rule(
    "small_collectives",
    definition="collectives below 1 MiB (where latency, not bandwidth, sets their time) per "
    "step and rank, median; their time at least 2 % of the step",
    threshold=20.0,
    unit="small collectives per step",
    noise="their time per step beats 3 x the run's step-to-step spread",
    advice="Fewer, larger messages: DDP buckets gradients (raise bucket_cap_mb, default 25); "
    "coalesce your own collectives (torch.distributed's coalescing manager, or flatten the "
    "tensors into one before the all-reduce).",
    needs=("device", "sig:small_colls"),
)
def small_collectives(view: RunView) -> list[dict]:
    if not view.per_step("colls").any():
        return []
    signal = view.per_step
    if not signal("sized_colls").any():
        view.coverage["small_collectives"] = (
            "could not run: the trace records no message sizes (record_param_comms or the "
            "collective kernels' 'In msg nelems')"
        )
        return []
    count = signal("small_colls")
    value = float(count.median())
    ms = signal("small_coll_ns") / 1e6
    share = float((100 * ms * 1e6 / view.rows.set_index(["rank", "step"])["wall_ns"]).median())
    if (
        value < RULES["small_collectives"].threshold
        or share < 2.0
        or not view.beats_noise(float(ms.median()))
    ):
        return []
    hot = count[count >= RULES["small_collectives"].threshold]
    evidence = {
        "small_collectives_per_step": round(value, 1),
        "below_bytes": SMALL_COLL_BYTES,
        "their_ms_per_step": round(float(ms.median()), 3),
        "share_of_step_pct": round(share, 2),
    }
    return [
        finding(
            "small_collectives", hot.index.get_level_values("rank"),
            [s for s in hot.index.get_level_values("step") if s >= 0], value,
            f"{value:.0f} collectives a step are smaller than 1 MiB and take "
            f"{evidence['their_ms_per_step']} ms: each pays the latency of a whole collective",
            evidence, gain_ms=0.8 * float(ms.median()),
        )
    ]  # fmt: skip


@rule(
    "low_bus_bandwidth",
    definition="bus bandwidth of the collectives of 4 MiB or more (nccl-tests: bytes x "
    "2(n-1)/n / time for an all-reduce), timed on the rank that waited least, against what "
    "the device's links give nccl-tests; value: the share reached",
    threshold=100 * FAR_BELOW,
    unit="% of the link's bus bandwidth",
    noise="timed on the last rank to arrive, so waiting for a straggler is not counted",
    advice="Check that the collectives use the fast links: NCCL_DEBUG=INFO (or CCL_LOG_LEVEL="
    "info) names the transport; NCCL_P2P/NVLink and the network plugin (NCCL_NET, "
    "NCCL_SOCKET_IFNAME, libfabric/CXI on Slingshot); the ranks' GPU/NIC binding "
    "(notebook 07); run nccl-tests / oneCCL benchmarks on the same nodes.",
    needs=("device", "sig:big_coll_busbytes"),
)
def low_bus_bandwidth(view: RunView) -> list[dict]:
    devices = {p.get("name", "") for m in view.meta.values()
               for p in (m.get("device_properties") or [])}  # fmt: skip
    links = [g for g in (N.device_link(d) for d in devices) if g]
    signal = view.per_step
    sized = signal("big_coll_ns")
    if not sized.any():
        return []
    if not links:
        view.coverage["low_bus_bandwidth"] = (
            f"could not run: the link bandwidth of {sorted(devices) or 'this device'} is not "
            "in the kit's table (hpcprof_kit/traces/view/names.py LINK_BUS_GBPS)"
        )
        return []
    link = min(links)
    busbytes, ns = signal("big_coll_busbytes"), sized
    ok = ns > 0
    gbps = (busbytes[ok] / ns[ok]).groupby(level="step").max()  # the rank that waited least
    value = 100 * float(gbps.median()) / link
    if value >= RULES["low_bus_bandwidth"].threshold:
        return []
    reached = float(gbps.median())
    ms = float(ns[ok].groupby(level="step").min().median()) / 1e6
    evidence = {
        "bus_bandwidth_gbps": round(reached, 2),
        "link_bus_bandwidth_gbps": link,
        "collectives_from_bytes": BIG_COLL_BYTES,
        "their_ms_per_step_least_waiting_rank": round(ms, 3),
    }
    return [
        finding(
            "low_bus_bandwidth", sorted({int(r) for r in ns[ok].index.get_level_values("rank")}),
            sorted({int(s) for s in gbps.index if s >= 0}), value,
            f"the large collectives reach {reached:.1f} GB/s of bus bandwidth, {value:.0f} % "
            f"of the {link:.0f} GB/s the links give nccl-tests",
            evidence, gain_ms=ms * (1 - reached / (0.5 * link)) if reached < 0.5 * link else 0,
        )
    ]  # fmt: skip
