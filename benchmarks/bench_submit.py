"""Submission latency: submit() -> RUNNING, and how soon a state change is seen.

Targets: local under 0.5 s to RUNNING; local Slurm under 3 s; a state change seen within 1.5 s.
Slurm rows need a running Slurm (SLURM_CONF set and sbatch on PATH); otherwise they are skipped.

    python benchmarks/bench_submit.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from hpcprof_kit.jobs import JobSpec, submit


def _until(job, states: set[str], poll: float, limit: float = 60.0) -> float:
    t0 = time.perf_counter()
    while job.refresh() not in states and time.perf_counter() - t0 < limit:
        time.sleep(poll)
    return time.perf_counter() - t0


def measure(system: str, backend: str, repeat: int) -> dict[str, list[float]]:
    spec = JobSpec(system=system, ranks_per_node=1, binding="none", command=["sleep", "1"])
    to_running, seen = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        job = submit(spec, backend=backend)
        _until(job, {"RUNNING", "COMPLETED"}, poll=0.02)
        to_running.append(time.perf_counter() - t0)
        # The job sleeps 1 s once running; the end is seen at the backend's own poll interval.
        started = time.perf_counter()
        job.wait(timeout=60, progress=False)
        seen.append(time.perf_counter() - started - 1.0)
    return {"submit -> RUNNING": to_running, "end seen after exit": seen}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("HPCPROF_RUNS_DIR", tempfile.mkdtemp(prefix="bench-submit-"))
    rows = [("local", "local", 0.5)]
    if os.environ.get("SLURM_CONF") and shutil.which("sbatch"):
        rows.append(("slurm", "slurm", 3.0))
    else:
        print("(slurm rows skipped: no SLURM_CONF/sbatch)", file=sys.stderr)
    print(f"{'backend':8} {'measure':22} {'median s':>9} {'max s':>7} {'target s':>9}")
    for system, backend, target in rows:
        for what, values in measure(system, backend, args.repeat).items():
            goal = target if what.startswith("submit") else 1.5
            print(
                f"{backend:8} {what:22} {statistics.median(values):9.3f} {max(values):7.3f} {goal:9.1f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
