"""A corpus of problem runs: from a seed, a synthetic multi-rank training run written as real
Kineto trace files (one ``corpus-<rank>-of-<world>.json`` per rank), with 0 to 3 planted
problems and its answer key. The diagnosis rules are measured on it
(``benchmarks/bench_diagnosis.py``) with seeds they were not tuned on, and the capstone
notebook hands each learner a run of their own (``hpcprof_kit.exercises.nb09``).

A run is simulated, not drawn: each rank has a host clock and a device clock. The host
launches ops (``aten::mm`` -> ``cudaLaunchKernel``); a kernel starts when the device is free
and its launch has happened, so a host that falls behind leaves the device idle and a device
that falls behind leaves the host waiting at the next sync. Collectives are synchronous: a
collective kernel ends when the last rank has arrived plus its transfer time (nccl-tests' bus
bandwidth formula). Every duration carries the run's jitter (2-5 %).

The names follow real Kineto traces: ``Memcpy HtoD (Pageable -> Device)`` copies with
``bytes`` and ``memory bandwidth (GB/s)``, ``cudaMemcpyAsync``/``cudaStreamSynchronize``/
``cudaMalloc``/``cudaFree`` runtime calls, ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``
kernels under ``record_param_comms`` (``Collective name``, ``In msg nelems``, ``dtype``,
``Group size``), tensor-core GEMMs (``sm90_xmma_gemm_bf16...``) against fp32 SIMT ones
(``ampere_sgemm_128x64_nn``); the XPU flavour uses ``urEnqueueKernelLaunch``,
``urEnqueueUSMMemcpy``, ``urUSMDeviceAlloc``/``urUSMFree``, ``gemm_kernel`` and ``xccl``.

>>> run = corpus_run(7)
>>> run.ranks >= 4 and all(p["kind"] in KINDS for p in run.key())
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# the kinds the corpus plants; XPU copy names do not say the memory kind, so no pageable there
KINDS = (
    "straggler",
    "pageable_copy",
    "sync_copy",
    "synchronize_in_step",
    "data_loading",
    "launch_bound",
    "allocator_churn",
    "no_tensor_cores",
    "small_collectives",
    "low_bus_bandwidth",
)
NOT_ON_XPU = ("pageable_copy",)
# the patterns no single rule of the list above names: a slow rank that changes from step to
# step, the same steps slow on every rank (a periodic save), a host stall on one rank
# (``hpcprof_kit.traces.corpus_patterns`` draws them)
PATTERNS = ("rotating_straggler", "slow_steps", "host_stall")
BASE_NS = 1_750_000_000_000_000_000
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
FLAVOURS = {
    "cuda": {
        "device": "NVIDIA H100 80GB HBM3",
        "backend": "nccl",
        "runtime_cat": "cuda_runtime",
        "launch": "cudaLaunchKernel",
        "copy": "cudaMemcpyAsync",
        "sync": "cudaStreamSynchronize",
        "alloc": "cudaMalloc",
        "free": "cudaFree",
        "gemm": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
        "_execute_segment_k_off_kernel__5x_cublas",
        "gemm_fp32": "ampere_sgemm_128x64_nn",
        "elementwise": "void at::native::vectorized_elementwise_kernel<4, "
        "at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >"
        "(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
        "elementwise_fp32": "void at::native::vectorized_elementwise_kernel<4, "
        "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >"
        "(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
        "tiny": "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor"
        "<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
        "at::detail::Array<char*, 2> >(int, at::native::AUnaryFunctor<float, float, float, "
        "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2>)",
        "h2d": "Memcpy HtoD (Pinned -> Device)",
        "h2d_pageable": "Memcpy HtoD (Pageable -> Device)",
        "d2h": "Memcpy DtoH (Device -> Pageable)",
        "coll_host": "nccl:all_reduce",
        "coll": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        "bus_gbps": 360.0,  # nccl-tests all-reduce bus bandwidth over NVLink 4, 8 GPUs
    },
    "xpu": {
        "device": "Intel(R) Data Center GPU Max 1550",
        "backend": "xccl",
        "runtime_cat": "xpu_runtime",
        "launch": "urEnqueueKernelLaunch",
        "copy": "urEnqueueUSMMemcpy",
        "sync": "urQueueFinish",
        "alloc": "urUSMDeviceAlloc",
        "free": "urUSMFree",
        "gemm": "gemm_kernel",
        "gemm_fp32": "gemm_kernel",  # oneDNN names both alike: the input types tell them apart
        "elementwise": "at::native::xpu::VectorizedElementwiseKernel<4, at::native::xpu::"
        "BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::xpu::"
        "AddFunctor<c10::BFloat16> >, at::detail::Array<char*, 3>, "
        "TrivialOffsetCalculator<2, unsigned int> >",
        "elementwise_fp32": "at::native::xpu::VectorizedElementwiseKernel<4, at::native::xpu::"
        "BinaryFunctor<float, float, float, at::native::xpu::AddFunctor<float> >, "
        "at::detail::Array<char*, 3>, TrivialOffsetCalculator<2, unsigned int> >",
        "tiny": "at::native::xpu::VectorizedElementwiseKernel<4, at::native::xpu::"
        "AUnaryFunctor<float, float, float, at::native::xpu::MulFunctor<float> >, "
        "at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int> >",
        "h2d": "Memcpy H2D (HOST -> DEVICE)",
        "h2d_pageable": "Memcpy H2D (HOST -> DEVICE)",
        "d2h": "Memcpy D2H (DEVICE -> HOST)",
        "coll_host": "xccl:all_reduce",
        "coll": "allreduce_execution_kernel",
        "bus_gbps": 150.0,
    },
}


@dataclass
class Problem:
    """One planted problem: its ``kind``, the ``ranks`` and ``steps`` it touches, and its
    ``size`` (what it means depends on the kind: a factor, ms, MB or a count)."""

    kind: str
    ranks: list[int]
    steps: list[int]
    size: float
    detail: dict = field(default_factory=dict)  # a pattern's other sizes
    cost_ms: dict = field(default_factory=dict)  # step -> wall ms it cost (the simulation's)

    def key(self) -> dict:
        out = {"kind": self.kind, "ranks": list(self.ranks), "steps": list(self.steps)}
        if self.kind in PATTERNS:
            out["cost_ms"] = round(sum(self.cost_ms.values()), 3)
        if self.kind == "rotating_straggler":
            out["slow_rank_by_step"] = dict(self.detail["by_step"])
        return out


@dataclass
class Run:
    """A run's shape and its problems; :meth:`write` makes its trace files."""

    ranks: int = 8
    steps: int = 8
    flavour: str = "cuda"
    jitter: float = 0.03
    seed: int = 0
    gemms: int = 8  # forward GEMMs; backward runs twice as many
    gemm_us: float = 1200.0
    batch_mb: float = 32.0
    buckets: int = 3
    bucket_mb: float = 25.0
    problems: list[Problem] = field(default_factory=list)
    first_step: int = 0  # the number of the first ProfilerStep

    def key(self) -> list[dict]:
        """The answer key: kind, ranks and steps of each planted problem that the trace can
        show. Small collectives replace the gradient buckets, so with them no collective is
        large enough to measure bus bandwidth: a low bus bandwidth planted beside them leaves
        nothing in the trace, and is not in the key."""
        kinds = {p.kind for p in self.problems}
        return [p.key() for p in self.problems
                if not (p.kind == "low_bus_bandwidth" and "small_collectives" in kinds)]  # fmt: skip

    def _p(self, kind: str) -> Problem | None:
        return next((p for p in self.problems if p.kind == kind), None)

    def write(self, directory: Path, prefix: str = "corpus") -> Path:
        """One ``<prefix>-<rank>-of-<ranks>.json`` per rank in ``directory``; returns it."""
        directory.mkdir(parents=True, exist_ok=True)
        f = FLAVOURS[self.flavour]
        for rank, events in enumerate(_simulate(self)):
            doc = {
                "schemaVersion": 1,
                "deviceProperties": [{"id": rank % 4, "name": f["device"]}],
                "distributedInfo": {
                    "backend": f["backend"],
                    "rank": rank,
                    "world_size": self.ranks,
                },
                "baseTimeNanoseconds": BASE_NS,
                "traceEvents": events,
            }
            (directory / f"{prefix}-{rank}-of-{self.ranks}.json").write_text(json.dumps(doc))
        return directory


def drawn_run(rng: np.random.Generator, seed: int, least_ranks: int, max_ranks: int) -> Run:
    """A run's shape drawn from ``rng``: ``least_ranks``-16 ranks (at most ``max_ranks``),
    6-10 steps, CUDA or XPU names, 2-5 % jitter, its GEMMs, batch and gradient buckets."""
    return Run(
        ranks=min(int(rng.integers(least_ranks, 17)), max_ranks),
        steps=int(rng.integers(6, 11)),
        flavour=str(rng.choice(["cuda", "cuda", "xpu"])),
        jitter=float(rng.uniform(0.02, 0.05)),
        seed=seed,
        gemms=int(rng.integers(6, 12)),
        gemm_us=float(rng.uniform(600, 2000)),
        batch_mb=float(rng.uniform(8, 64)),
        buckets=int(rng.integers(2, 5)),
        bucket_mb=float(rng.uniform(10, 40)),
    )


def corpus_run(seed: int, problems: int | None = None, max_ranks: int = 16) -> Run:
    """The run of ``seed``: 4-16 ranks (at most ``max_ranks``: a smaller run of the same
    draw), 6-10 steps, CUDA (H100) or XPU (Max 1550) names, 2-5 % jitter, and ``problems``
    planted problems (0-3, drawn when None) of distinct kinds, each on random ranks and steps
    with a random size."""
    rng = np.random.default_rng(seed)
    run = drawn_run(rng, seed, 4, max_ranks)
    n = int(rng.integers(0, 4)) if problems is None else problems
    kinds = [k for k in KINDS if run.flavour == "cuda" or k not in NOT_ON_XPU]
    everyone, all_steps = list(range(run.ranks)), list(range(run.steps))
    chosen = [str(k) for k in rng.choice(kinds, size=n, replace=False)]
    fp32 = float(rng.uniform(2.5, 4.0))  # fp32 SIMT GEMMs take this much longer than bf16
    base_ms = 3 * run.gemms * run.gemm_us / 1e3 * (fp32 if "no_tensor_cores" in chosen else 1)
    for kind in chosen:
        if kind == "straggler":
            rank = int(rng.integers(0, run.ranks))
            if rng.random() < 0.5:  # persistent
                steps = all_steps
            else:  # intermittent: 2 or 3 steps, never the first
                steps = sorted(int(s) for s in rng.choice(all_steps[1:], rng.integers(2, 4), False))
            run.problems.append(Problem(str(kind), [rank], steps, float(rng.uniform(1.3, 2.0))))
            continue
        share = rng.uniform(0.08, 0.3)  # of the steady step's compute
        size = {
            "pageable_copy": share * base_ms * 5.8,  # MB from pageable memory (5.8 MB/ms)
            "sync_copy": share * base_ms * 6.0,  # MB copied to the host, blocking it
            "synchronize_in_step": share * base_ms,  # ms of host work after .item()
            "data_loading": share * base_ms,  # ms the host waits for the next batch
            "launch_bound": rng.integers(200, 500),  # tiny kernels per step
            "allocator_churn": rng.integers(6, 30),  # cudaMalloc/cudaFree pairs per step
            "no_tensor_cores": fp32,
            "small_collectives": rng.integers(100, 250),  # all-reduces of 16-256 KB per step
            "low_bus_bandwidth": rng.uniform(0.02, 0.10),  # share of the link's bus bandwidth
        }[str(kind)]
        run.problems.append(Problem(str(kind), everyone, all_steps, float(size)))
    return run


class _Trace:
    """The events of one rank, with the ids Kineto gives them."""

    def __init__(self, rank: int, flavour: dict, rng: np.random.Generator, jitter: float):
        self.ev: list[dict] = []
        self.f, self.rng, self.j = flavour, rng, jitter
        self.pid = 4000 + rank
        self.dev = rank % 4
        self.ext = self.corr = 0

    def d(self, us: float) -> float:
        """``us`` with the run's jitter."""
        return float(us * self.rng.uniform(1 - self.j, 1 + self.j))

    def host(self, cat: str, name: str, ts: float, dur: float, **args) -> None:
        if "External id" not in args:  # a runtime call shares the External id of its op
            self.ext += 1
            args["External id"] = self.ext
        self.ev.append({"ph": "X", "cat": cat, "name": name, "pid": self.pid, "tid": self.pid,
                        "ts": ts, "dur": dur, "args": args})  # fmt: skip

    def device(self, cat: str, name: str, ts: float, dur: float, stream: int, **args) -> None:
        args.update({"External id": self.ext, "device": self.dev, "stream": stream,
                     "correlation": self.corr})  # fmt: skip
        self.ev.append({"ph": "X", "cat": cat, "name": name, "pid": self.dev, "tid": stream,
                        "ts": ts, "dur": dur, "args": args})  # fmt: skip


COMPUTE, COMM = 7, 20


def _launch(t: _Trace, h: float, d: float, op: str, kernel: str, us: float, **op_args):
    """An op that launches one kernel: returns the host and device clocks after it."""
    op_us = t.d(22.0)
    t.host("cpu_op", op, h, op_us, **op_args)
    t.corr += 1
    t.host(t.f["runtime_cat"], t.f["launch"], h + 4, t.d(8.0),
           **{"External id": t.ext, "correlation": t.corr})  # fmt: skip
    start = max(d, h + 12)
    dur = t.d(us)
    t.device("kernel", kernel, start, dur, COMPUTE)
    return h + op_us + t.d(6.0), start + dur


def _simulate(run: Run) -> list[list[dict]]:
    """Every rank's events; ranks advance together phase by phase so collectives line up."""
    rng = np.random.default_rng(run.seed + 1_000_003)
    f = FLAVOURS[run.flavour]
    traces = [_Trace(r, f, rng, run.jitter) for r in range(run.ranks)]
    h = np.full(run.ranks, 1000.0)  # host clocks (µs)
    d = h.copy()  # device clocks: when each device's compute stream is free
    p = {k: run._p(k) for k in (*KINDS, *PATTERNS)}
    rot, stall, save = p["rotating_straggler"], p["host_stall"], p["slow_steps"]
    dtype = "float" if p["no_tensor_cores"] else "c10::BFloat16"
    gemm = f["gemm_fp32"] if p["no_tensor_cores"] else f["gemm"]
    gemm_factor = p["no_tensor_cores"].size if p["no_tensor_cores"] else 1.0
    # the elementwise kernels run in the model's dtype too: no BFloat16 name in a float32 run
    elementwise = f["elementwise_fp32"] if p["no_tensor_cores"] else f["elementwise"]
    kernels = (gemm, elementwise)
    for s in range(run.first_step, run.first_step + run.steps):
        start = h.copy()
        for r, t in enumerate(traces):
            hr, dr = h[r], max(d[r], h[r])
            slow = 1.0
            if p["straggler"] and r in p["straggler"].ranks and s in p["straggler"].steps:
                slow = p["straggler"].size
            if rot and rot.detail["by_step"].get(s) == r:
                slow *= rot.size
            loader = p["data_loading"].size * 1e3 if p["data_loading"] else 300.0
            t.host("cpu_op", LOADER, hr, t.d(loader))
            hr += t.d(loader) + 10
            hr, dr = _batch_copy(t, run, p["pageable_copy"], hr, dr)
            if p["launch_bound"]:  # per-sample preprocessing op by op: the device waits
                for _ in range(int(p["launch_bound"].size)):
                    hr, dr = _launch(t, hr, dr, "aten::mul_", f["tiny"], 4.0)
            if stall and r in stall.ranks and s in stall.steps:  # mid-forward, no op: a GC pause
                half = run.gemms // 2
                hr, dr = _layers(t, run, hr, dr, kernels, dtype, gemm_factor * slow, half, p)
                stall.cost_ms[s] = float(max(0.0, hr + stall.size * 1e3 + 12 - dr)) / 1e3
                hr += stall.size * 1e3
                hr, dr = _layers(t, run, hr, dr, kernels, dtype, gemm_factor * slow,
                                 run.gemms - half, p)  # fmt: skip
            else:
                hr, dr = _layers(t, run, hr, dr, kernels, dtype, gemm_factor * slow, run.gemms, p)
            if p["synchronize_in_step"]:
                hr, dr = _item_then_log(t, hr, dr, p["synchronize_in_step"].size)
            hr, dr = _layers(t, run, hr, dr, kernels, dtype, gemm_factor * slow, 2 * run.gemms, p)
            if p["sync_copy"]:
                hr, dr = _copy_to_host(t, hr, dr, p["sync_copy"].size)
            h[r], d[r] = hr, dr
        if rot and s in rot.detail["by_step"]:  # what the others waited for the slow rank
            arrive, slow_rank = np.maximum(d, h), rot.detail["by_step"][s]
            others = np.delete(arrive, slow_rank)
            lead = arrive[slow_rank] - (others.max() if others.size else arrive[slow_rank])
            rot.cost_ms[s] = max(0.0, float(lead)) / 1e3
        h, d = _collectives(traces, run, h, d, p)
        for r, t in enumerate(traces):
            hr, dr = h[r], d[r]
            for _ in range(8):
                hr, dr = _launch(t, hr, dr, "aten::_foreach_add_", elementwise, 90.0)
            if save and s in save.steps:  # a checkpoint: to pageable host memory, then a write
                before = max(hr, dr)
                hr, dr = _copy_to_host(t, hr, dr, save.detail["copy_mb"])
                hr += save.size * 1e3  # the file write: host time no op covers
                if r == 0:
                    save.cost_ms[s] = float(max(hr, dr) - before) / 1e3
            end = max(hr, dr) + 15
            # the step span goes first in the file, as the profiler writes it on exit
            t.ev.insert(0, {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}",
                            "pid": t.pid, "tid": t.pid, "ts": float(start[r]),
                            "dur": float(end - start[r]), "args": {"External id": 0}})  # fmt: skip
            h[r] = d[r] = end + 5
    return [t.ev for t in traces]


def _batch_copy(t: _Trace, run: Run, pageable, h: float, d: float):
    """The batch to the device: pinned and non-blocking, or pageable, which blocks the host
    for the whole copy (the driver stages it through a pinned buffer)."""
    mb = pageable.size if pageable else run.batch_mb
    gbps = 5.8 if pageable else 24.0
    dur = t.d(mb * 1e6 / (gbps * 1e9) * 1e6)
    start = max(d, h + 15)
    t.host("cpu_op", "aten::to", h, (start + dur - h + 8) if pageable else t.d(30.0))
    t.corr += 1
    t.host(t.f["runtime_cat"], t.f["copy"], h + 6,
           (start + dur - h) if pageable else t.d(9.0), correlation=t.corr)  # fmt: skip
    name = t.f["h2d_pageable"] if pageable else t.f["h2d"]
    t.device("gpu_memcpy", name, start, dur, COMPUTE,
             **{"bytes": int(mb * 1e6), "memory bandwidth (GB/s)": round(mb * 1e3 / dur, 3)})  # fmt: skip
    return (start + dur + 10 if pageable else h + 40), start + dur


def _layers(t: _Trace, run: Run, h, d, kernels, dtype, factor, n, p):
    """``n`` GEMMs, each followed by an elementwise kernel (``kernels``: the two names, in the
    run's dtype); with allocator churn, a
    cudaMalloc before some and a cudaFree (which waits for the device) after."""
    churn = p["allocator_churn"]
    every = max(1, (3 * run.gemms) // int(churn.size)) if churn else 0
    for i in range(n):
        if churn and i % every == 0:
            t.host(t.f["runtime_cat"], t.f["alloc"], h, a := t.d(180.0))
            h += a + 4
        shapes = {"Input type": [dtype, dtype], "Input Dims": [[4096, 4096], [4096, 4096]]}
        h, d = _launch(t, h, d, "aten::mm", kernels[0], run.gemm_us * factor, **shapes)
        h, d = _launch(t, h, d, "aten::add", kernels[1], 45.0 * factor)
        if churn and i % every == 0:
            h = max(h, d)  # freeing device memory synchronises the device
            t.host(t.f["runtime_cat"], t.f["free"], h, a := t.d(300.0))
            h += a + 4
    return h, d


def _item_then_log(t: _Trace, h: float, d: float, log_ms: float):
    """``loss.item()``: a 4-byte copy after a sync; then host-side logging, device idle."""
    wait_end = max(d, h + 20)
    t.host("cpu_op", "aten::item", h, wait_end - h + 12)
    t.host("cpu_op", "aten::_local_scalar_dense", h + 2, wait_end - h + 8)
    t.corr += 1
    t.host(t.f["runtime_cat"], t.f["copy"], h + 4, t.d(6.0), correlation=t.corr)
    t.device("gpu_memcpy", t.f["d2h"], wait_end - 4, 2.0,
             COMPUTE, **{"bytes": 4, "memory bandwidth (GB/s)": 0.002})  # fmt: skip
    t.host(t.f["runtime_cat"], t.f["sync"], h + 12, wait_end - h - 12)
    h = wait_end + 14
    t.host("python_function", "train.py(88): log_metrics", h, dur := t.d(log_ms * 1e3))
    return h + dur + 5, d


def _copy_to_host(t: _Trace, h: float, d: float, mb: float):
    """``tensor.cpu()`` of ``mb`` MB: the copy waits for the device, the host waits for it."""
    if mb <= 0:
        return h, d
    start = max(d, h + 15)
    dur = t.d(mb * 1e6 / (6.0e9) * 1e6)
    t.host("cpu_op", "aten::to", h, start + dur - h + 10)
    t.host("cpu_op", "aten::_to_copy", h + 2, start + dur - h + 6)
    t.corr += 1
    t.host(t.f["runtime_cat"], t.f["copy"], h + 5, start + dur - h, correlation=t.corr)
    t.device("gpu_memcpy", t.f["d2h"], start, dur, COMPUTE,
             **{"bytes": int(mb * 1e6), "memory bandwidth (GB/s)": round(mb * 1e3 / dur, 3)})  # fmt: skip
    return start + dur + 12, start + dur


def _collectives(traces: list[_Trace], run: Run, h: np.ndarray, d: np.ndarray, p: dict):
    """The gradient all-reduces, synchronous across ranks: each ends when the last rank has
    arrived plus its transfer time at the run's bus bandwidth (nccl-tests: busbw = algbw x
    2(n-1)/n for an all-reduce) and a latency of ~20 µs."""
    f, n = FLAVOURS[run.flavour], run.ranks
    small = p["small_collectives"]
    if small:
        sizes = traces[0].rng.uniform(16e3, 256e3, int(small.size))
    else:
        sizes = np.full(run.buckets, run.bucket_mb * 1e6)
    gbps = f["bus_gbps"] * (p["low_bus_bandwidth"].size if p["low_bus_bandwidth"] else 1.0)
    for nbytes in sizes:
        arrive = np.empty(n)
        for r, t in enumerate(traces):
            nelems = int(nbytes // 4)
            args = {"Collective name": "allreduce", "In msg nelems": nelems,
                    "Out msg nelems": nelems, "dtype": "Float", "Group size": n}  # fmt: skip
            t.host("cpu_op", "record_param_comms", h[r], op := t.d(24.0), **args)
            t.host("cpu_op", f["coll_host"], h[r] + 2, op - 4)
            t.corr += 1
            t.host(f["runtime_cat"], f["launch"], h[r] + 6, t.d(8.0), correlation=t.corr)
            arrive[r] = max(d[r], h[r] + 14)
            h[r] += op + 4
        xfer = 20.0 + nbytes * 2 * (n - 1) / n / (gbps * 1e9) * 1e6
        end = arrive.max() + traces[0].d(xfer)
        for r, t in enumerate(traces):
            nelems = int(nbytes // 4)
            args = {"Collective name": "allreduce", "In msg nelems": nelems,
                    "Out msg nelems": nelems, "dtype": "Float", "Group size": n}  # fmt: skip
            t.device("kernel", f["coll"], arrive[r], end - arrive[r], COMM, **args)
            d[r] = end
    return h, d
