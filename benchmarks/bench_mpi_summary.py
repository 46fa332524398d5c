"""The analysis of a run as an MPI job: wall time, cost per rank file and peak RSS per MPI rank.

    python benchmarks/bench_mpi_summary.py                  # 16, 64, 256 files of 2 MB; -n 1, -n 2
    python benchmarks/bench_mpi_summary.py --mb 20 --counts 16 64

For each run size it writes a synthetic run (benchmarks/bench_analyses_scale.write_run), then
runs ``traces.reporting.mpi_summary.run_summary`` under Hydra ``mpiexec -n 1`` and ``-n 2``, and prints one
row per (files, MPI ranks): wall seconds (median of ``--repeat``, min-max), seconds per file,
the speed-up of -n 2 over -n 1, the largest file, the peak RSS of each MPI rank (its own
``getrusage``), and how far that peak grew above the rank's RSS once the interpreter and the
libraries of the analysis were imported, before it read any trace, as a multiple of the largest
file. Every run is cold: the loader's cache beside
the traces (``.hpcprof-cache``) is removed first. The load average is printed with each row.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The kit of the checkout this script is in (its MPI workers too), not an installed one: a base
# commit's copy measures the base's code.
sys.path.insert(0, str(HERE.parent))
ANALYSIS_MODULES = (
    "pandas",
    "matplotlib.pyplot",
    "hpcprof_kit.traces.view.summary",
    "hpcprof_kit.traces.reporting.summary_store",
    "hpcprof_kit.traces.analyses.spread",
    "hpcprof_kit.traces.plots.charts",
    "hpcprof_kit.traces.table.loader",
)


def worker(folder: str) -> int:
    """One MPI rank: analyse ``folder`` with the others; rank 0 prints every rank's figures."""
    from mpi4py import MPI

    from hpcprof_kit.traces.reporting.mpi_summary import run_summary

    comm = MPI.COMM_WORLD
    # the interpreter and every library the analysis uses (NumPy, pandas, matplotlib, MPI),
    # imported before any trace is read: what stays whatever the run's size
    for name in ANALYSIS_MODULES:
        importlib.import_module(name)
    base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    comm.Barrier()
    started = time.perf_counter()
    run_summary([folder], comm=comm)
    comm.Barrier()
    seconds = time.perf_counter() - started
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    rows = comm.gather(
        {"rank": comm.Get_rank(), "seconds": seconds, "rss_mb": rss_mb, "base_mb": base_mb}, root=0
    )
    if comm.Get_rank() == 0:  # one line from one rank: ranks' writes may interleave
        print("ROWS " + json.dumps(rows), flush=True)
    return 0


def measure(folder: Path, procs: int) -> tuple[float, list[float], list[float]]:
    """One cold analysis (the loader's cache beside the traces removed first)."""
    shutil.rmtree(folder / ".hpcprof-cache", ignore_errors=True)
    mpiexec = Path(sys.executable).parent / "mpiexec"
    cmd = [str(mpiexec), "-n", str(procs), sys.executable, __file__, "--worker", str(folder)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("ROWS "))
    rows = json.loads(line[5:])
    return (
        max(r["seconds"] for r in rows),
        [r["rss_mb"] for r in rows],
        [r["rss_mb"] - r["base_mb"] for r in rows],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--mb", type=float, default=2.0, help="size of each rank file")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    sys.path.insert(0, str(HERE))
    from bench_analyses_scale import write_run

    print(f"{'files':>5} {'MPI':>3} {'wall s (min-max)':>22} {'s/file':>7} {'speed-up':>8} "
          f"{'largest MB':>10} {'peak RSS MB per rank':>22} {'growth MB':>10} "
          f"{'growth/largest':>14}  load")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for count in args.counts:
            folder = Path(tmp) / f"run{count}"
            write_run(folder, count, args.mb)
            largest = max(p.stat().st_size for p in folder.iterdir()) / 2**20
            one = None
            for procs in (1, 2):
                walls, rss, grown = [], [], []
                for _ in range(args.repeat):
                    wall, peaks, growth = measure(folder, procs)
                    walls.append(wall)
                    rss = [max(a, b) for a, b in zip(rss or peaks, peaks, strict=True)]
                    grown = [max(a, b) for a, b in zip(grown or growth, growth, strict=True)]
                med = statistics.median(walls)
                one = med if procs == 1 else one
                speed = f"{one / med:.2f}x" if procs == 2 else "-"
                load = f"{os.getloadavg()[0]:.1f}"
                peaks = "/".join(f"{r:.0f}" for r in rss)
                growth = "/".join(f"{g:.0f}" for g in grown)
                print(f"{count:>5} {procs:>3} {med:>8.2f} ({min(walls):.2f}-{max(walls):.2f})"
                      f"{med / count:>9.3f} {speed:>8} {largest:>10.1f} {peaks:>22} {growth:>10} "
                      f"{max(grown) / largest:>14.2f}  {load}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
