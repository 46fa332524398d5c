"""CPU-only problem runs, written as real Kineto trace files as ``torch.profiler`` writes
them on a host without a device: ``ProfilerStep#N`` ranges, outermost ``aten::`` ops with
nested ones inside, the DataLoader's ``__next__``, and ``[memory]`` instant events (``Bytes``,
``Total Allocated``, ``Addr``) when ``memory`` is on. Every duration carries the run's jitter.

Problems: ``launch_bound`` (``size`` tiny ``aten::mul_`` a step, ~6 µs each with the Python
between them) and ``allocator_churn`` (an ``aten::ones`` of ``size`` ms a step that allocates
a 64 MiB block, freed before the step ends). A clean run still has the glue of a step: a few
dozen tiny optimizer ops, small allocations, and a 48 MiB activation kept from one step to the
next (not churn: it outlives its step).

>>> run = CpuRun(seed=1, problems={"launch_bound": 400})
>>> run.ranks, sorted(run.problems)
(2, ['launch_bound'])
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

BASE_NS = 1_760_000_000_000_000_000
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
MIB = 1 << 20


@dataclass
class CpuRun:
    """A CPU-only run of ``ranks`` ranks and ``steps`` steps with ``problems`` (kind -> size)."""

    seed: int
    problems: dict[str, float] = field(default_factory=dict)
    ranks: int = 2
    steps: int = 7
    jitter: float = 0.03
    memory: bool = True

    def write(self, directory: Path) -> Path:
        """One ``cpu-<rank>-of-<ranks>.json`` per rank in ``directory``; returns it."""
        directory.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(self.seed)
        for rank in range(self.ranks):
            doc = {
                "schemaVersion": 1,
                "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": self.ranks},
                "baseTimeNanoseconds": BASE_NS,
                "traceEvents": _Rank(self, rank, rng).events(),
            }
            (directory / f"cpu-{rank}-of-{self.ranks}.json").write_text(json.dumps(doc))
        return directory


class _Rank:
    def __init__(self, run: CpuRun, rank: int, rng: np.random.Generator):
        self.run, self.rng, self.pid = run, rng, 5000 + rank
        self.ev: list[dict] = []
        self.allocated = 0
        self.addr = 0x7F0000000000

    def d(self, us: float) -> float:
        return float(us * self.rng.uniform(1 - self.run.jitter, 1 + self.run.jitter))

    def span(self, cat: str, name: str, ts: float, dur: float) -> None:
        self.ev.append({"ph": "X", "cat": cat, "name": name, "pid": self.pid, "tid": self.pid,
                        "ts": ts, "dur": dur, "args": {}})  # fmt: skip

    def memory(self, ts: float, nbytes: int, addr: int) -> None:
        if not self.run.memory:
            return
        self.allocated += nbytes
        self.ev.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                        "pid": self.pid, "tid": self.pid, "ts": ts,
                        "args": {"Total Reserved": 0, "Total Allocated": self.allocated,
                                 "Bytes": nbytes, "Addr": addr, "Device Id": -1,
                                 "Device Type": 0}})  # fmt: skip

    def op(self, name: str, h: float, us: float, alloc: int = 4096) -> float:
        """An outermost op with a nested ``aten::empty`` that allocates ``alloc`` bytes,
        freed as the op ends; returns the host clock after it."""
        dur = self.d(us)
        self.span("cpu_op", name, h, dur)
        self.span("cpu_op", "aten::empty", h + 0.2 * dur, 0.1 * dur)
        if alloc:
            self.addr += 0x1000
            self.memory(h + 0.25 * dur, alloc, self.addr)
            self.memory(h + 0.9 * dur, -alloc, self.addr)
        return h + dur + self.d(3.0)

    def events(self) -> list[dict]:
        p, h = self.run.problems, 1000.0
        kept = None  # the activation that outlives its step
        for step in range(self.run.steps):
            start = h
            h = self.op(LOADER, h, 900.0) + 5
            for _ in range(6):
                h = self.op("aten::mm", h, 1500.0)
            if kept is not None:
                self.memory(h, -48 * MIB, kept)
            kept = self.addr = self.addr + 0x10000000
            self.memory(h + 1, 48 * MIB, kept)
            h += 5
            for _ in range(int(p.get("launch_bound", 0))):
                dur = self.d(6.0)
                self.span("cpu_op", "aten::mul_", h, dur)
                self.span("cpu_op", "aten::to", h + 0.3 * dur, 0.3 * dur)
                h += dur + self.d(2.0)
            if "allocator_churn" in p:
                block = self.addr = self.addr + 0x10000000
                dur = self.d(1000.0 * p["allocator_churn"])
                self.span("cpu_op", "aten::ones", h, dur)
                self.memory(h + 2, 64 * MIB, block)
                h += dur + self.d(20.0)
                self.memory(h, -64 * MIB, block)
            for _ in range(6):
                h = self.op("autograd::engine::evaluate_function: MmBackward0", h, 3000.0)
            for _ in range(30):  # the optimizer's glue: tiny, and few
                h = self.op("aten::add_", h, 5.0, alloc=0)
            self.span("user_annotation", f"ProfilerStep#{step}", start, h - start)
            h += 20
        return self.ev
