"""Overhead of the kit's profiler on steps it does not record (target: < 2 % of step time).

Runs 2 ranks with Hydra mpiexec on the CPU. Each rank times the same step twice in a row, the
second followed by ``prof.step()`` of a ``make_profiler`` profiler, and reports the median of
each over the steps the profiler does not record: once while it waits for its cycle, once after
its last cycle. Prints one table row per phase and rank.

    python benchmarks/bench_profiler_overhead.py [--steps 400] [--size 512]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The two kinds of steps a profiler does not record: before its cycle (wait) and after it.
PHASES = {
    "wait (before recording)": lambda steps: {
        "wait": steps + 10,
        "warmup": 1,
        "active": 1,
        "repeat": 1,
    },
    "after the last cycle": lambda steps: {"wait": 0, "warmup": 1, "active": 1, "repeat": 1},
}


def worker(steps: int, size: int) -> None:
    for phase, schedule in PHASES.items():
        worker_phase(phase, schedule(steps), steps, size)


def worker_phase(phase: str, schedule: dict, steps: int, size: int) -> None:
    import torch

    from hpcprof_kit.dist import ranks_from_env
    from hpcprof_kit.profiling import make_profiler

    info = ranks_from_env(use_mpi=False)
    torch.set_num_threads(1)
    a = torch.rand(size, size)

    def step() -> None:
        (a @ a).relu_().sum()

    plain: list[float] = []
    profiled: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        prof = make_profiler(schedule=schedule,
                             rank=info.rank, world_size=info.world_size, trace_dir=Path(tmp) / "traces")  # fmt: skip
        with prof:
            # Interleaved, so drift and the neighbours' load hit both loops alike.
            for _ in range(steps):
                t0 = time.perf_counter()
                step()
                t1 = time.perf_counter()
                step()
                prof.step()
                t2 = time.perf_counter()
                plain.append(t1 - t0)
                profiled.append(t2 - t1)
    skip = 10  # first steps: warm-up and the recorded cycle
    print(json.dumps({"phase": phase, "rank": info.rank, "plain": statistics.median(plain[skip:]),
                      "profiled": statistics.median(profiled[skip:])}), flush=True)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.steps, args.size)
        return 0
    mpiexec = Path(sys.executable).parent / "mpiexec"
    env = dict(os.environ, KINETO_LOG_LEVEL="6")
    cmd = [str(mpiexec if mpiexec.exists() else "mpiexec"), "-n", "2", sys.executable, __file__,
           "--worker", "--steps", str(args.steps), "--size", str(args.size)]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    rows = sorted(
        (json.loads(line) for line in out.splitlines() if line.startswith("{")),
        key=lambda r: (list(PHASES).index(r["phase"]), r["rank"]),
    )
    print(
        f"{'idle steps':<24}  {'rank':>4}  {'plain step (ms)':>16}  {'profiled step (ms)':>19}  {'overhead':>9}"
    )
    for r in rows:
        overhead = (r["profiled"] - r["plain"]) / r["plain"] * 100
        print(
            f"{r['phase']:<24}  {r['rank']:>4}  {r['plain'] * 1e3:>16.3f}  "
            f"{r['profiled'] * 1e3:>19.3f}  {overhead:>8.2f}%"
        )
    print(f"median of {args.steps - 10} steps per rank; target: overhead < 2 %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
