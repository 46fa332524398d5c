"""Rule on memory allocated and freed inside steps: on a device, the caching allocator bypassed
or emptied (``torch.cuda.empty_cache()``), each ``cudaFree`` synchronising the device; on a
CPU-only run, large host blocks allocated and freed every step, each a fresh ``mmap`` whose
pages fault in again (seen in the ``[memory]`` events of ``profile_memory=True``).

>>> from hpcprof_kit.traces.findings.base import RULES
>>> RULES["allocator_churn"].unit
'% of step'
"""

from __future__ import annotations

from hpcprof_kit.traces.findings.base import (
    RULES,
    device_events_missing,
    finding,
    lacks,
    rule,
    share_rule,
)
from hpcprof_kit.traces.findings.startup import startup
from hpcprof_kit.traces.view.host_signals import CHURN_BYTES
from hpcprof_kit.traces.view.run_view import RunView

CPU_CHURN_ADVICE = (
    "Allocate large buffers once, outside the loop, and reuse them (out= arguments, in-place "
    "ops, a preallocated scratch tensor); keep shapes steady so the same blocks fit; a caching "
    "malloc keeps freed pages mapped (LD_PRELOAD libjemalloc.so or libtcmalloc.so, as Intel's "
    "CPU tuning guides advise)."
)


@rule(
    "allocator_churn",
    definition="host time in device allocations and frees inside steps (cudaMalloc/cudaFree, "
    "hipMalloc/hipFree, urUSM*Alloc/urUSMFree, zeMem*), median over the rank's steps, % of "
    "wall; two calls a step or more. On a CPU-only run: host blocks of 32 MiB or more "
    "allocated and freed within the same step (``[memory]`` events), the host time of the ops "
    "that allocated them (first touch of the fresh pages included)",
    threshold=2.0,
    unit="% of step",
    noise="its ms per step beat 3 x the run's step-to-step spread; on the CPU, a block churned "
    "in the median step",
    advice="Let the caching allocator keep memory: no torch.cuda.empty_cache() in the loop; "
    "keep shapes steady (pad batches) so blocks are reused; PYTORCH_CUDA_ALLOC_CONF="
    "expandable_segments:True; check that nothing sets PYTORCH_NO_CUDA_MEMORY_CACHING.",
)
def allocator_churn(view: RunView) -> list[dict]:
    why = lacks(view, "alloc_ns" if view.on_device else "churn_ns")
    why = why or device_events_missing(view)  # no CPU advice to a device run
    if why is None and not view.on_device and view.per_step("memory_events").sum() == 0:
        why = ("could not run: a CPU-only run shows its allocations only in [memory] events, "
               "and this trace has none; record them with profile_memory=True (the kit's "
               "--profile-memory, on by default)")  # fmt: skip
    if why is not None:
        view.coverage["allocator_churn"] = why
        return []
    return _churn_device(view) if view.on_device else _churn_host(view)


def _churn_device(view: RunView) -> list[dict]:
    spans = startup(view)
    if spans is not None:
        return _churn_after_startup(view, spans)
    if float(view.per_step("alloc_calls").median()) < 2:
        return []
    hit = share_rule(view, "allocator_churn", "alloc_ns")
    if hit is None:
        return []
    value, effect, ranks, steps = hit
    evidence = {
        "calls_per_step": int(view.per_step("alloc_calls").median()),
        "host_ms_per_step": round(effect, 3),
    }
    return [
        finding(
            "allocator_churn", ranks, steps, value,
            f"{evidence['calls_per_step']} device allocations and frees a step take "
            f"{effect:.1f} ms ({value:.1f} %) of the host, and each free waits for the device",
            evidence, gain_ms=effect,
        )
    ]  # fmt: skip


def _churn_host(view: RunView) -> list[dict]:
    """The CPU twin: large host blocks allocated and freed in the same step, every step."""
    if float(view.per_step("churn_blocks").median()) < 1:
        return []
    hit = share_rule(view, "allocator_churn", "churn_ns")
    if hit is None:
        return []
    value, effect, ranks, steps = hit
    blocks = int(view.per_step("churn_blocks").median())
    evidence = {
        "blocks_per_step": blocks,
        "min_block_mib": CHURN_BYTES >> 20,
        "allocating_ops_ms_per_step": round(effect, 3),
    }
    # no gain estimate: the allocating ops' time holds their work as well as the page faults
    return [
        finding(
            "allocator_churn", ranks, steps, value,
            f"{blocks} host block(s) of {CHURN_BYTES >> 20} MiB or more are allocated and freed "
            f"inside every step; the ops that allocate them take {effect:.1f} ms ({value:.1f} %) "
            "of the step, faulting in fresh pages each time",
            evidence, advice=CPU_CHURN_ADVICE,
        )
    ]  # fmt: skip


def _churn_after_startup(view: RunView, spans) -> list[dict]:
    """On a trace without steps: the allocations and frees after start-up (the first device
    event), as a share of that time; those of start-up (the runtime's first cudaFree, the
    model's first allocations) are set apart and named; no gain per step."""
    wall = (spans["end_ns"] - spans["steady_ns"]).astype(float)
    share = 100.0 * spans["steady_alloc_ns"].astype(float) / wall.where(wall > 0)
    hot = spans[(spans["steady_alloc_calls"] >= 2)
                & (share.fillna(0.0) >= RULES["allocator_churn"].threshold)]  # fmt: skip
    if hot.empty:
        return []
    value = float(share[hot.index].max())
    evidence = {
        "calls_after_startup": int(hot["steady_alloc_calls"].sum()),
        "host_ms_after_startup": round(float(hot["steady_alloc_ns"].sum()) / 1e6, 3),
        "startup_calls_set_apart": int(hot["startup_alloc_calls"].sum()),
        "startup_ms_set_apart": round(float(hot["startup_alloc_ns"].sum()) / 1e6, 3),
    }
    return [
        finding(
            "allocator_churn", hot.index, [], value,
            f"{evidence['calls_after_startup']} device allocations and frees after start-up "
            f"take {evidence['host_ms_after_startup']:.1f} ms ({value:.1f} % of the trace "
            "after start-up; the trace has no steps), and each free waits for the device; "
            f"start-up's {evidence['startup_calls_set_apart']} "
            f"({evidence['startup_ms_set_apart']:.1f} ms) are set apart",
            evidence,
        )
    ]  # fmt: skip
