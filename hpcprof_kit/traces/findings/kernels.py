"""Rules on the kernels themselves: GEMMs in fp32 on a GPU with tensor cores (or XMX, or
matrix cores), and compiled graphs that break or recompile.

>>> RULES["no_tensor_cores"].threshold
50.0
"""

from __future__ import annotations

import re

from hpcprof_kit.traces.findings.base import RULES, finding, rule
from hpcprof_kit.traces.view import names as N
from hpcprof_kit.traces.view.run_view import RunView


@rule(
    "no_tensor_cores",
    definition="GEMM and convolution time in fp32 kernels that do not use the tensor cores "
    "(cuBLAS/cuDNN ``sgemm``/``scudnn``, cuDNN's engines templated on ``<float``, or "
    "``gemm_kernel`` of an op whose inputs are ``float``), % of all GEMM time; GEMMs 10 % of the steps or more",
    threshold=50.0,
    unit="% of GEMM time",
    noise="a share of the GEMM time, far from the threshold when it holds",
    advice="Let the tensor cores work: torch.backends.cuda.matmul.allow_tf32 = True (or "
    "torch.set_float32_matmul_precision('high')) and torch.backends.cudnn.allow_tf32 = True "
    "for TF32; better, bf16 autocast: with torch.autocast(device_type, dtype=torch.bfloat16).",
    needs=("device", "sig:fp32_gemm_ns"),
)
def no_tensor_cores(view: RunView) -> list[dict]:
    props = [p for m in view.meta.values() for p in (m.get("device_properties") or [])
             if isinstance(p, dict)]  # fmt: skip
    devices = {p.get("name", "") for p in props}
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
    generation = precision_generation(props)
    evidence = {
        "fp32_gemm_ms_per_step": round(float(fp32.median()) / 1e6, 3),
        "gemm_ms_per_step": round(float(gemm.median()) / 1e6, 3),
        "devices": sorted(known),
        "generation": generation,
    }
    return [
        finding(
            "no_tensor_cores", hot.index.get_level_values("rank"),
            [s for s in hot.index.get_level_values("step") if s >= 0], value,
            f"{value:.0f} % of the GEMM time ({evidence['fp32_gemm_ms_per_step']} ms a step) "
            "runs in fp32 kernels that leave the tensor cores unused",
            evidence, gain_ms=0.5 * float(fp32.median()) / 1e6,
            advice=PRECISION_ADVICE.get(generation),
        )
    ]  # fmt: skip


# What lets the tensor cores work, by what they run: Volta's and Turing's run fp16 alone (no
# TF32, no bf16), Ampere's and later NVIDIA's TF32 and bf16 too, Intel's XMX bf16 and TF32
PRECISION_ADVICE = {
    "fp16 only": "This GPU's tensor cores run fp16 alone: TF32 and bf16 do nothing here. Use "
    "fp16 mixed precision with loss scaling: with torch.autocast('cuda', dtype=torch.float16) "
    "around the forward pass and the loss, and scaler = torch.amp.GradScaler('cuda'); "
    "scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update().",
    "xpu": "Let the XMX engines work: bf16 autocast, with torch.autocast('xpu', "
    "dtype=torch.bfloat16); or TF32 for fp32 GEMMs: torch.set_float32_matmul_precision('high') "
    "(with IPEX: ipex.set_fp32_math_mode(mode=ipex.FP32MathMode.TF32)).",
}
# compute capability (major, minor) below which tensor cores run fp16 alone (Volta 7.0/7.2,
# Turing 7.5); names where the properties give none
_FP16_ONLY = (8, 0)
_FP16_ONLY_NAMES = r"V100|Titan V|Quadro GV100|T4\b|RTX 20\d\d|Quadro RTX|TITAN RTX"
_XPU_NAMES = r"Intel|Data Center GPU Max|Arc"


def precision_generation(props: list[dict]) -> str:
    """What the devices' tensor cores run: ``fp16 only`` (compute capability under 8.0:
    Volta, Turing), ``xpu`` (Intel's XMX), ``bf16 and tf32`` (Ampere and later, by compute
    capability), or ``unknown``.

    >>> precision_generation([{"name": "Tesla V100-SXM2-32GB", "computeMajor": 7,
    ...                        "computeMinor": 0}])
    'fp16 only'
    >>> precision_generation([{"name": "NVIDIA H100 80GB HBM3"}])
    'unknown'
    >>> precision_generation([{"name": "Intel(R) Data Center GPU Max 1550"}])
    'xpu'
    """
    found = set()
    for p in props:
        major, minor = p.get("computeMajor"), p.get("computeMinor")
        name = str(p.get("name", ""))
        if isinstance(major, int) and major > 0:
            found.add("fp16 only" if (major, minor or 0) < _FP16_ONLY else "bf16 and tf32")
        elif re.search(_FP16_ONLY_NAMES, name):
            found.add("fp16 only")
        elif re.search(_XPU_NAMES, name):
            found.add("xpu")
    return found.pop() if len(found) == 1 else "unknown"


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
