"""The run report against loading the same run: ``report`` on a loaded table vs ``load``.

Writes a synthetic NCCL run of ``--ranks`` rank files of ``--mb`` MiB each
(``make_synthetic_trace.py``), then, ``--repeat`` times, loads it without the cache
(``traces.load(..., cache=False)``) and right after builds its report from the loaded table
(``traces.report(df)``: every pane's tables and the findings; no plots, no HTML), each report
beside its own load so that a machine's drift moves both alike, and also writes the HTML once. Prints medians with min-max, and the report / load ratio (goal: 1.5 or
less; each pair's report / load, min-max), with the machine's load average.

The rank files carry the arguments a real CUDA run writes with ``record_shapes=True`` (copy
bytes, collective sizes, input types, launch shapes: ``make_synthetic_trace.py --args``), as
the rules read some of them, and the ``[memory]`` events of ``profile_memory=True`` (``--memory``
there), which the kit and the guides record by default and the memory pane and the allocator
rule read; ``--bare`` writes the ids alone, and ``--no-memory`` no ``[memory]`` events, as
every figure before 2026-11-28 did.

    python benchmarks/bench_report.py                      # 64 and 256 ranks of 1 MiB
    python benchmarks/bench_report.py --ranks 16 --mb 0.5  # quicker
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from make_synthetic_trace import write_trace  # noqa: E402


def fmt(times: list[float]) -> str:
    return f"{statistics.median(times):7.2f} ({min(times):.2f}-{max(times):.2f})"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[64, 256])
    p.add_argument("--mb", type=float, default=1.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--bare", action="store_true", help="rank files without event arguments")
    p.add_argument("--no-memory", action="store_true", help="rank files without [memory] events")
    args = p.parse_args(argv)
    from hpcprof_kit import traces

    warnings.simplefilter("ignore")
    print(
        f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; "
        f"{os.cpu_count()} CPUs; {args.mb} MiB per rank, "
        f"{'no event arguments' if args.bare else 'with event arguments'}, "
        f"{'no [memory] events' if args.no_memory else 'with [memory] events'}; "
        f"median (min-max) of {args.repeat}, s"
    )
    print(f"{'ranks':>6} {'events':>10} {'load':>20} {'report':>20} {'ratio':>6} "
          f"{'each pair':>11} {'html':>7}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.ranks:
            folder = Path(tmp) / f"r{n}"
            folder.mkdir()
            for r in range(n):
                path = folder / f"synthetic-{r}-of-{n}.json"
                write_trace(
                    path, args.mb, rank=r, world=n, args=not args.bare, memory=not args.no_memory
                )
            # each report right after its own load, so a machine that slows down or speeds
            # up between them moves both figures alike; the ratio is of the medians
            load_t, rep_t, df, rep = [], [], None, None
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                df = traces.load(folder, cache=False)
                load_t.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                rep = traces.report(df)
                rep_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            rep.write_html(folder / "report.html")
            html_t = time.perf_counter() - t0
            ratio = statistics.median(rep_t) / statistics.median(load_t)
            pairs = [r / lo for r, lo in zip(rep_t, load_t, strict=True)]
            print(
                f"{n:>6} {len(df):>10,} {fmt(load_t):>20} {fmt(rep_t):>20} {ratio:>6.2f} "
                f"{f'{min(pairs):.2f}-{max(pairs):.2f}':>11} {html_t:>7.2f}"
            )
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
