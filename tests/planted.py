"""Runs with planted problems, written as Kineto traces of a CUDA DDP job (one file per rank).

Each step of each rank: optionally a host-only data-loading op (the device waits), then
``KERNELS`` compute kernels launched by ``aten::mm`` ops through ``cudaLaunchKernel``, then an
NCCL all-reduce kernel on its own stream. The all-reduce is synchronous: it starts when the
rank arrives and ends when the last rank has arrived plus the transfer time, so the ranks that
arrive early wait in it, as NCCL kernels do. Every step ends when its all-reduce ends.

>>> run = Planted(ranks=2, steps=2)
>>> run.step_ms(0) > 0
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

BASE_NS = 1_700_000_000_000_000_000
KERNELS = 10
GEMM = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


@dataclass
class Planted:
    """A run: ``ranks`` x ``steps``; ``kernel_us`` per compute kernel, ``slow`` rank -> factor
    on its kernels, ``host_gap`` rank -> µs of data loading with the device idle, ``comm_us``
    the all-reduce's own transfer time, ``jitter`` the relative noise on every kernel."""

    ranks: int = 8
    steps: int = 6
    kernel_us: float = 2000.0
    slow: dict[int, float] = field(default_factory=dict)
    host_gap: dict[int, float] = field(default_factory=dict)
    comm_us: float = 300.0
    jitter: float = 0.005
    seed: int = 0
    step_factor: dict[int, float] = field(default_factory=dict)  # step -> factor on its kernels
    sync_gap_us: float = 0.0  # mid-step cudaStreamSynchronize, then host work with the device idle

    def _kernels(self) -> np.ndarray:
        """steps x ranks x KERNELS kernel durations (µs)."""
        rng = np.random.default_rng(self.seed)
        base = self.kernel_us * rng.uniform(1 - self.jitter, 1 + self.jitter)
        dur = base * rng.uniform(
            1 - self.jitter, 1 + self.jitter, (self.steps, self.ranks, KERNELS)
        )
        for rank, factor in self.slow.items():
            dur[:, rank] *= factor
        for step, factor in self.step_factor.items():
            dur[step] *= factor
        return dur

    def step_ms(self, step: int) -> float:
        """The wall time of ``step`` (ms), the same on every rank."""
        return self._layout()[step][1] / 1e3

    def _layout(self) -> list[tuple[float, float, np.ndarray]]:
        """Per step: (start µs, wall µs, per-rank arrival µs after the step's start)."""
        dur = self._kernels()
        out, t = [], 1000.0
        for s in range(self.steps):
            arrive = np.array(
                [
                    20.0 + self.host_gap.get(r, 0.0) + self.sync_gap_us + dur[s, r].sum()
                    for r in range(self.ranks)
                ]
            )
            wall = arrive.max() + self.comm_us + 100.0
            out.append((t, wall, arrive))
            t += wall + 50.0
        return out

    def events(self, rank: int) -> list[dict]:
        dur = self._kernels()
        ev: list[dict] = []
        corr = ext = 0

        def op(cat, name, ts, d, **args):
            ev.append(
                {
                    "ph": "X",
                    "cat": cat,
                    "name": name,
                    "pid": 100,
                    "tid": 100,
                    "ts": ts,
                    "dur": d,
                    "args": args,
                }
            )

        for s, (start, wall, arrive) in enumerate(self._layout()):
            ext += 1
            op("user_annotation", f"ProfilerStep#{s}", start, wall, **{"External id": ext})
            t = start + 5.0
            if rank in self.host_gap:
                ext += 1
                op("cpu_op", LOADER, t, self.host_gap[rank], **{"External id": ext})
                t += self.host_gap[rank]
            device_t = start + 20.0 + self.host_gap.get(rank, 0.0)
            for k in range(KERNELS):
                ext += 1
                corr += 1
                op("cpu_op", "aten::mm", t, 12.0, **{"External id": ext})
                op(
                    "cuda_runtime",
                    "cudaLaunchKernel",
                    t + 2.0,
                    8.0,
                    **{"External id": ext, "correlation": corr},
                )
                kdur = float(dur[s, rank, k])
                ev.append(
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": GEMM,
                        "pid": 0,
                        "tid": 7,
                        "ts": device_t,
                        "dur": kdur,
                        "args": {"External id": ext, "device": 0, "stream": 7, "correlation": corr},
                    }
                )
                device_t += kdur
                t += 14.0
                if self.sync_gap_us and k == KERNELS // 2 - 1:
                    # the host waits for the device, then works while the device has nothing
                    op(
                        "cuda_runtime",
                        "cudaStreamSynchronize",
                        t,
                        device_t - t,
                        **{"External id": 0},
                    )
                    t = device_t
                    ext += 1
                    op("cpu_op", "aten::to", t, self.sync_gap_us, **{"External id": ext})
                    t += self.sync_gap_us
                    device_t = t + 10.0
            ext += 1
            corr += 1
            arrival = start + float(arrive[rank])
            op("cpu_op", "nccl:all_reduce", t, 10.0, **{"External id": ext})
            op(
                "cuda_runtime",
                "cudaLaunchKernel",
                t + 1.0,
                6.0,
                **{"External id": ext, "correlation": corr},
            )
            end = start + float(arrive.max()) + self.comm_us
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": NCCL,
                    "pid": 0,
                    "tid": 20,
                    "ts": arrival,
                    "dur": end - arrival,
                    "args": {"External id": ext, "device": 0, "stream": 20, "correlation": corr},
                }
            )
        return ev

    def write(self, directory: Path) -> Path:
        """One ``trace-<rank>-of-<ranks>.json`` per rank in ``directory``; returns it."""
        directory.mkdir(parents=True, exist_ok=True)
        for rank in range(self.ranks):
            doc = {
                "schemaVersion": 1,
                "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB"}],
                "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": self.ranks},
                "baseTimeNanoseconds": BASE_NS,
                "traceEvents": self.events(rank),
            }
            path = directory / f"trace-{rank}-of-{self.ranks}.json"
            path.write_text(json.dumps(doc))
        return directory
