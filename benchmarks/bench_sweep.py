"""Sweeps: what a sweep of 8 local variants adds over submitting the same 8 jobs by hand, one
after another; and ``compare`` on a sweep of 64 variants (run directories written here, 2 ranks
x 20 steps each).

Goal: the sweep within 5 % of the jobs by hand. The two are measured in turns (hand, sweep,
hand, sweep...) in the same process; the ratio is taken per turn, then its median.

    python benchmarks/bench_sweep.py [--repeat 5] [--job-s 0.5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hpcprof_kit.jobs import JobSpec, submit
from hpcprof_kit.jobs.sweep import Sweep

VARIANTS = 8
COMPARED = 64


def _spread(values: list[float]) -> str:
    ordered = sorted(values)
    lo = ordered[int(0.1 * (len(ordered) - 1))]
    hi = ordered[round(0.9 * (len(ordered) - 1))]
    return f"{lo:.3f}-{hi:.3f}"


def _base(job_s: float) -> JobSpec:
    # A job of job_s seconds; the varied flag is an argument the program ignores.
    code = f"import time; time.sleep({job_s})"
    return JobSpec(system="local", ranks_per_node=1, binding="none",
                   command=["python3", "-c", code])  # fmt: skip


def by_hand(job_s: float, root: Path) -> float:
    base, t0 = _base(job_s), time.perf_counter()
    for i in range(VARIANTS):
        submit(base.with_(args=("--variant", str(i))), runs_root=root).wait(progress=False)
    return time.perf_counter() - t0


def as_sweep(job_s: float, root: Path) -> float:
    t0 = time.perf_counter()
    Sweep(_base(job_s), {"--variant": list(range(VARIANTS))}, runs_root=root).validate().run()
    return time.perf_counter() - t0


def planted_sweep(root: Path) -> Sweep:
    base = JobSpec(system="local", example="seqpar", ranks_per_node=2, binding="none")
    sweep = Sweep(base, {"--warmup": list(range(COMPARED))}, runs_root=root).validate()
    sweep.create()
    for i in range(COMPARED):
        timings = sweep.path / f"run{i}" / "timings"
        timings.mkdir(parents=True)
        for rank in range(2):
            steps = [0.010 + 0.0001 * ((i * 7 + s * 3 + rank) % 11) for s in range(20)]
            record = {"app": "seqpar", "rank": rank, "world_size": 2, "nodes": 1,
                      "dtype": "float32", "params": {"seq_len": 1536},
                      "timings": {"matmul_1": [s * 0.6 for s in steps],
                                  "all_gather": [s * 0.3 for s in steps], "step": steps}}  # fmt: skip
            (timings / f"seqpar-{rank}-of-2.json").write_text(json.dumps(record))
        sweep.mark(i, run_dir=f"run{i}", state="COMPLETED")
    return sweep


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--job-s", type=float, default=0.5, help="how long each job runs")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    os.environ.setdefault("HPCPROF_WORKSHOP", "off")
    hand, swept = [], []
    for _ in range(args.repeat):
        hand.append(by_hand(args.job_s, root))
        swept.append(as_sweep(args.job_s, root))
    ratios = [s / h for s, h in zip(swept, hand, strict=True)]
    sweep = planted_sweep(root)
    sweep.compare()  # first call pays pandas' imports
    compare_s = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        sweep.compare()
        compare_s.append(time.perf_counter() - t0)

    print(f"{'measure':44} {'median s':>9} {'p10-p90 s':>13} {'ratio':>7}")
    print(f"{f'{VARIANTS} jobs by hand ({args.job_s:g} s each)':44} "
          f"{statistics.median(hand):9.3f} {_spread(hand):>13} {1.0:7.3f}")  # fmt: skip
    print(f"{f'sweep of the same {VARIANTS} variants':44} {statistics.median(swept):9.3f} "
          f"{_spread(swept):>13} {statistics.median(ratios):7.3f}")  # fmt: skip
    print(f"{'sweep overhead (goal <= 5 %)':44} "
          f"{statistics.median(swept) - statistics.median(hand):9.3f} {'':>13} "
          f"{(statistics.median(ratios) - 1) * 100:6.1f}%")  # fmt: skip
    print(f"{f'compare, {COMPARED} variants x 2 ranks x 20 steps':44} "
          f"{statistics.median(compare_s):9.3f} {_spread(compare_s):>13} {'':>7}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
