"""The event names the rules recognise, as data: CUDA, HIP and XPU (Level Zero / Unified
Runtime) twins side by side, and the devices that have tensor cores (or XMX, or matrix cores)
with the all-reduce bus bandwidth nccl-tests reaches on their links.

>>> bool(PAGEABLE_H2D.search("Memcpy HtoD (Pageable -> Device)"))
True
>>> bool(ALLOC.match("urUSMDeviceAlloc")), bool(ALLOC.match("cudaMallocHost"))
(True, False)
>>> bool(FP32_GEMM.search("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_"
...                        "warpsize4x2x1_ffma_aligna4_alignc4_execute_kernel_trmm"))
True
>>> bus_factor("allreduce", 8)
1.75
"""

from __future__ import annotations

import re

COMPILED_REGION = "Torch-Compiled Region: "
# synchronous copies: the host waits for the work queued before them, then for the copy
SYNC_COPY_CALLS = re.compile(r"^(?:cuda|hip)Memcpy(?:2D)?$|^hipMemcpy(?:DtoH|HtoD|WithStream)$")
# host calls that wait for the device: CUDA / HIP syncs, synchronous copies, Level Zero / UR
# waits, .item()
SYNC_NAMES = (
    r"^(?:cuda|hip)(?:Device|Stream|Event)Synchronize$|^urQueueFinish$|^urEventWait$"
    rf"|{SYNC_COPY_CALLS.pattern}"
    r"|^zeEventHostSynchronize$|^zeCommandQueueSynchronize$|^aten::_local_scalar_dense$"
)
LOADER = re.compile(r"DataLoader|DataLoaderIter|dataloader")
# Kineto's copy names carry the memory kind: "Memcpy HtoD (Pageable -> Device)"
MEMORY_KIND = re.compile(r"\((?:Pageable|Pinned|Device|Managed)\s*->")
PAGEABLE_H2D = re.compile(r"(?:HtoD|H2D).*\(Pageable ->")
D2H = re.compile(r"DtoH|D2H|DEVICE -> HOST|Device -> (?:Pageable|Pinned|Host)")
# device memory allocated or freed by the runtime (the caching allocator bypassed)
ALLOC = re.compile(
    r"^(?:cudaMalloc|cudaFree|cudaMallocAsync|cudaFreeAsync|hipMalloc|hipFree|hipMallocAsync"
    r"|hipFreeAsync|hipExtMallocWithFlags|urUSMDeviceAlloc|urUSMSharedAlloc|urUSMFree"
    r"|zeMemAllocDevice|zeMemAllocShared|zeMemFree)$"
)
GEMM = re.compile(r"(?i)gemm|xmma|nvjet|cutlass|cublas|Cijk_|scudnn|conv|wgrad|dgrad")
# fp32 on the SIMT cores: cuBLAS/cuDNN's sgemm and scudnn kernels, cuBLAS's xmma kernels built
# on FFMA (``sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_..._ffma_...``: what an H100 runs for fp32
# with TF32 off, though "xmma" names the tensor-core family too), hipBLASLt's fp32 (SB)
FP32_GEMM = re.compile(
    r"(?i)(?:^|[_ ])sgemm|s?gemm_?fp32|scudnn|implicit_convolve_sgemm|_ffma_"
    r"|gemmSN_|Cijk_\w*_SB_(?!.*MI\d)"
)
# a kernel templated on float, with no half type among its parameters (cuDNN's engines)
FLOAT_TEMPLATE = re.compile(r"<float\b")
HALF_TEMPLATE = re.compile(r"(?i)half|bfloat|__nv_bfloat16|\bbf16|fp16")
TENSOR_CORE_GEMM = re.compile(
    r"(?i)xmma|hmma|tensorop|s1688|s16816|h1688|h16816|i8816|884gemm|nvjet|wgmma|tf32|bf16"
    r"|f16|fp16|_MI\d+x\d+"
)
# devices with tensor cores / matrix cores / XMX, and their all-reduce bus bandwidth (GB/s)
# within a node as nccl-tests reports it on 8 devices (public results, rounded down)
LINK_BUS_GBPS = [
    (r"H100|H200|H800|GH200", 360.0),
    (r"B200|B100|GB200", 650.0),
    (r"A100|A800", 230.0),
    (r"V100", 130.0),
    (r"MI300", 300.0),
    (r"MI250|MI210", 150.0),
    (r"Max 1550|Max 1100|Data Center GPU Max", 150.0),
    (r"A10\b|A30|A40|L4\b|L40|T4\b|RTX", 20.0),  # PCIe
]


def device_link(name: str) -> float | None:
    """The bus bandwidth (GB/s) a device's links give an all-reduce, None when not listed."""
    for pattern, gbps in LINK_BUS_GBPS:
        if re.search(pattern, name or ""):
            return gbps
    return None


def bus_factor(collective: str, group: int) -> float:
    """nccl-tests' bus-bandwidth factor: busbw = algbw x factor."""
    n = max(int(group), 1)
    c = (collective or "").lower().replace("_", "")
    if c in ("allreduce",):
        return 2 * (n - 1) / n
    if c in ("allgather", "reducescatter", "alltoall", "allgatherintocoalesced",
             "reducescattertensorcoalesced"):  # fmt: skip
        return (n - 1) / n
    return 1.0
