"""Rule on device memory allocated and freed inside steps: the caching allocator bypassed or
emptied (``torch.cuda.empty_cache()``), each ``cudaFree`` synchronising the device.

>>> from hpcprof_kit.traces.findings.base import RULES
>>> RULES["allocator_churn"].unit
'% of step'
"""

from __future__ import annotations

from .base import RunView, finding, rule, share_rule


@rule(
    "allocator_churn",
    definition="host time in device allocations and frees inside steps (cudaMalloc/cudaFree, "
    "hipMalloc/hipFree, urUSM*Alloc/urUSMFree, zeMem*), median over the rank's steps, % of "
    "wall; two calls a step or more",
    threshold=2.0,
    unit="% of step",
    noise="its ms per step beat 3 x the run's step-to-step spread",
    advice="Let the caching allocator keep memory: no torch.cuda.empty_cache() in the loop; "
    "keep shapes steady (pad batches) so blocks are reused; PYTORCH_CUDA_ALLOC_CONF="
    "expandable_segments:True; check that nothing sets PYTORCH_NO_CUDA_MEMORY_CACHING.",
    needs=("device", "sig:alloc_ns"),
)
def allocator_churn(view: RunView) -> list[dict]:
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
