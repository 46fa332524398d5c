"""Rules on the kernels themselves: GEMMs in fp32 on a GPU with tensor cores (or XMX, or
matrix cores), and compiled graphs that break or recompile.

>>> RULES["no_tensor_cores"].threshold
50.0
"""

from __future__ import annotations

from hpcprof_kit.traces.findings.base import RULES, finding, rule
from hpcprof_kit.traces.view import names as N
from hpcprof_kit.traces.view.run_view import RunView


@rule(
    "no_tensor_cores",
    definition="GEMM and convolution time in fp32 kernels that do not use the tensor cores "
    "(cuBLAS/cuDNN ``sgemm``/``scudnn``, or ``gemm_kernel`` of an op whose inputs are "
    "``float``), % of all GEMM time; GEMMs 10 % of the steps or more",
    threshold=50.0,
    unit="% of GEMM time",
    noise="a share of the GEMM time, far from the threshold when it holds",
    advice="Let the tensor cores work: torch.backends.cuda.matmul.allow_tf32 = True (or "
    "torch.set_float32_matmul_precision('high')) and torch.backends.cudnn.allow_tf32 = True "
    "for TF32; better, bf16 autocast: with torch.autocast(device_type, dtype=torch.bfloat16).",
    needs=("device", "sig:fp32_gemm_ns"),
)
def no_tensor_cores(view: RunView) -> list[dict]:
    devices = {p.get("name", "") for m in view.meta.values()
               for p in (m.get("device_properties") or [])}  # fmt: skip
    known = [d for d in devices if d]
    if known and not any(N.device_link(d) for d in known):
        view.coverage["no_tensor_cores"] = (
            f"not applicable: {sorted(known)} is not a device the kit knows to have tensor cores"
        )
        return []
    gemm = view.per_step("gemm_ns")
    fp32 = view.per_step("fp32_gemm_ns")
    total = float(gemm.sum())
    wall = float(view.rows["wall_ns"].sum())
    if total <= 0 or total < 0.1 * wall:
        return []
    value = 100.0 * float(fp32.sum()) / total
    if value < RULES["no_tensor_cores"].threshold:
        return []
    hot = fp32[fp32 > 0]
    evidence = {
        "fp32_gemm_ms_per_step": round(float(fp32.median()) / 1e6, 3),
        "gemm_ms_per_step": round(float(gemm.median()) / 1e6, 3),
        "devices": sorted(known),
    }
    return [
        finding(
            "no_tensor_cores", hot.index.get_level_values("rank"),
            [s for s in hot.index.get_level_values("step") if s >= 0], value,
            f"{value:.0f} % of the GEMM time ({evidence['fp32_gemm_ms_per_step']} ms a step) "
            "runs in fp32 kernels that leave the tensor cores unused",
            evidence, gain_ms=0.5 * float(fp32.median()) / 1e6,
        )
    ]  # fmt: skip


@rule(
    "graph_breaks",
    definition="compiled regions per step (``Torch-Compiled Region: f/r``); a recompile "
    "(``r`` > 0) is named in the evidence",
    threshold=1,
    unit="compiled regions per step",
    noise="a count of distinct regions",
    advice="Find the breaks with TORCH_LOGS=graph_breaks (or torch._dynamo.explain); "
    "recompiles with TORCH_LOGS=recompiles; mark dynamic shapes or keep them static.",
)
def graph_breaks(view: RunView) -> list[dict]:
    sig = view.sig
    per = sig[(sig["step"] >= 0) & (sig["regions"] > 0)]
    if per.empty:
        return []
    value = float(per["regions"].median())
    names = sorted({n for text in per["region_names"] for n in text.split(",") if n})
    recompiles = [n for n in names if "/" in n and n.split("/")[-1] not in ("0", "")]
    if value <= RULES["graph_breaks"].threshold and not recompiles:
        return []
    return [
        finding(
            "graph_breaks", sorted(per["rank"].unique()), sorted(per["step"].unique()), value,
            f"each step runs {value:.0f} compiled regions: the model graph breaks"
            + (f"; recompiled: {', '.join(recompiles)}" if recompiles else ""),
            {"regions": names, "recompiled": recompiles},
        )
    ]  # fmt: skip
