"""Single-file cold parse: the kit's loader beside ``json.load``, and where the kit's time goes.

Writes a synthetic Kineto-layout trace (``make_synthetic_trace.py``, default 200 MiB, about
1.1 M events), then takes turns, ``--repeat`` rounds: ``json.load`` of the file, then the kit's
``load_file(..., cache=False)``, each in a fresh process (cold: imports done, nothing parsed).
The kit's child times each pass of the parse (wall and CPU seconds) by wrapping the loader's
functions, so the breakdown comes from the same runs as the rate.

    python benchmarks/bench_parse.py               # 200 MiB, 3 rounds
    python benchmarks/bench_parse.py --mb 50 --repeat 5
    python benchmarks/bench_parse.py --kit /tmp/old-checkout   # an older loader, same table

The ratio is the median of the per-round ratios (json.load time / kit time), so a slow spell
of a shared machine that hits one round hits both readers of that round alike. CPU seconds
are shown too: other jobs on the machine stretch wall time, much less the CPU a reader uses.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

CHILD = r"""
import json, sys, time
import numpy, pandas, msgspec
from collections import Counter
what, path = sys.argv[1], sys.argv[2]
wall, cpu = Counter(), Counter()
if what.startswith("kit"):
    from hpcprof_kit.traces import loader, stream

    def timed(owner, name, label):
        inner = getattr(owner, name)
        def run(*a, **k):
            t, c = time.perf_counter(), time.process_time()
            try:
                return inner(*a, **k)
            finally:
                wall[label] += time.perf_counter() - t
                cpu[label] += time.process_time() - c
        setattr(owner, name, run)

    timed(stream._Reader, "_scan_slice", "scan")
    timed(stream._Reader, "_decode", "decode")
    timed(stream.Columns, "add", "gather")
    timed(stream._Reader, "_keep", "keep")
    timed(stream.Columns, "finish", "join")
    timed(stream, "read_chrome", "read_chrome")
    timed(loader, "_parse", "parse")
t, c = time.perf_counter(), time.process_time()
if what.startswith("kit"):
    rows = len(loader.load_file(path, cache=False))
else:
    with open(path) as fh:
        rows = len(json.load(fh)["traceEvents"])
wall["total"], cpu["total"] = time.perf_counter() - t, time.process_time() - c
print(json.dumps({"wall": wall, "cpu": cpu, "rows": rows}))
"""

READERS = {
    "json": "json.load (stdlib)",
    "kit-msgspec": "kit, msgspec only",
    "kit": "kit (compiled scanner)",
}

# pass -> how it is derived from the wrapped functions' (nested) times
PASSES = {
    "read + cut into slices": lambda s: (
        s["read_chrome"] - s["scan"] - s["decode"] - s["keep"] - s["join"]
    ),
    "scan slices (compiled)": lambda s: s["scan"],
    "decode slices (msgspec)": lambda s: s["decode"],
    "pick kept phases": lambda s: s["keep"] - s["gather"],
    "gather columns (NumPy)": lambda s: s["gather"],
    "join columns, vocabularies": lambda s: s["join"],
    "tracks, steps, text labels": lambda s: s["parse"] - s["read_chrome"],
    "table (DataFrame), rest": lambda s: s["total"] - s["parse"],
}


def run_child(what: str, path: Path, kit: Path = REPO) -> dict:
    # "kit-msgspec": the same loader with its compiled scanner off (every slice via msgspec)
    env = dict(
        os.environ, PYTHONPATH=str(kit), HPCPROF_SCANNER="off" if what == "kit-msgspec" else "on"
    )
    done = subprocess.run(
        [sys.executable, "-c", CHILD, what, str(path)], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        raise SystemExit(f"{what} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} ({min(values):.2f}-{max(values):.2f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200.0, help="size of the trace (MiB)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians are shown)")
    parser.add_argument("--trace", type=Path, default=None, help="use this trace instead")
    parser.add_argument(
        "--kit", type=Path, default=REPO, help="import hpcprof_kit from this checkout instead"
    )
    args = parser.parse_args(argv)

    work = None
    trace = args.trace
    if trace is None:
        sys.path.insert(0, str(HERE))
        from make_synthetic_trace import write_trace

        work = Path(tempfile.mkdtemp(prefix="bench-parse-"))
        trace = work / "synthetic-0-of-2.json"
        write_trace(trace, args.mb, rank=0, world=2)
    mb = trace.stat().st_size / 1e6
    loads = [os.getloadavg()[0]]
    rounds = []
    for _ in range(args.repeat):
        rounds.append({what: run_child(what, trace, args.kit) for what in READERS})
        loads.append(os.getloadavg()[0])
    rows = rounds[0]["kit"]["rows"]
    print(f"trace: {mb:.1f} MB, {rows:,} table rows; {args.repeat} rounds, each reader in a")
    print(f"fresh process; median (min-max); {os.cpu_count()} CPUs\n")

    print(f"{'reader':24s} {'wall s':>20s} {'MB/s':>6s} {'CPU s':>20s} {'MB/CPU-s':>8s}")
    for name, label in READERS.items():
        w = [r[name]["wall"]["total"] for r in rounds]
        c = [r[name]["cpu"]["total"] for r in rounds]
        rate, crate = mb / statistics.median(w), mb / statistics.median(c)
        print(f"{label:24s} {spread(w):>20s} {rate:6.0f} {spread(c):>20s} {crate:8.0f}")
    for kit in ("kit-msgspec", "kit"):
        ratio_w = [r["json"]["wall"]["total"] / r[kit]["wall"]["total"] for r in rounds]
        ratio_c = [r["json"]["cpu"]["total"] / r[kit]["cpu"]["total"] for r in rounds]
        label = f"{kit} / json.load"
        print(f"{label:24s} {spread(ratio_w):>19s}x {'':6s} {spread(ratio_c):>19s}x")

    for kit in ("kit-msgspec", "kit"):
        print(f"\nwhere {READERS[kit]}'s time goes (seconds per pass):")
        print(f"{'pass':28s} {'wall':>20s} {'CPU':>20s}")
        for name, derive in PASSES.items():
            w = [derive(Counter(r[kit]["wall"])) for r in rounds]  # a pass never run: 0
            c = [derive(Counter(r[kit]["cpu"])) for r in rounds]
            if max(w) > 0.005:
                print(f"{name:28s} {spread(w):>20s} {spread(c):>20s}")
    print(f"\nmachine load (os.getloadavg, 1 min): {', '.join(f'{x:.2f}' for x in loads)}")
    if work is not None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
