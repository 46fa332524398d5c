"""Benchmark: draw a timeline of 1 M nested events with depth lanes, to PNG (target: <= 3 s).

Builds a synthetic trace table shaped like a real one (2 ranks; ProfilerStep > forward /
backward / optimizer > modules > ops > runtime launches on the main thread, their kernels on a
device stream, an all-reduce per step on a thread of its own), times ``plot_timeline`` +
``savefig`` and, in the same run, ``json.load`` of a Chrome trace JSON of the same events: the
ratio says how the timeline compares with merely reading the file, whatever the machine.

    python benchmarks/bench_timeline.py [--events 1000000] [--repeat 3]
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

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib  # noqa: E402

matplotlib.use("Agg")

from hpcprof_kit.traces.plots.timeline import plot_timeline  # noqa: E402
from hpcprof_kit.traces.table.schema import COLUMNS  # noqa: E402

TARGET_S = 3.0
STEP_NS = 200_000_000  # one step: 200 ms, a third of it per phase
PHASES = ("forward", "backward", "optimizer")
# the middle level of each phase, as torch names it
MIDDLE = {"forward": "nn.Module: Block", "backward": "autograd::engine::evaluate_function: "
          "MmBackward0", "optimizer": "Optimizer.step#Adam.step"}  # fmt: skip


def _rank_events(rank: int, n_events: int, n_steps: int, modules: int) -> dict[str, list]:
    """Rows of one rank: per op an op, a launch (runtime) and a kernel (device), nested."""
    per_step = n_events // n_steps
    ops = max(1, -(-(per_step // len(PHASES) - modules) // (3 * modules)))  # at least n
    cols: dict[str, list] = {k: [] for k in ("track", "tid", "name", "ts", "dur", "corr", "dev")}

    def add(track, tid, name, ts, dur, corr=-1, dev=-1):
        n = np.size(ts)
        for key, value in (("track", track), ("tid", tid), ("name", name), ("corr", corr),
                           ("dev", dev)):  # fmt: skip
            cols[key].append(np.broadcast_to(np.asarray(value), n))
        cols["ts"].append(np.asarray(ts, dtype=np.int64).ravel())
        cols["dur"].append(np.broadcast_to(np.asarray(dur, dtype=np.int64), n).ravel())

    phase_ns, corr0 = STEP_NS // 3, rank * 10**9
    mod_ns = (phase_ns - 2000) // modules  # children end inside their parents
    op_ns = mod_ns // (ops + 1)
    for step in range(n_steps):
        t = step * STEP_NS + rank * 1_000_000
        add("cpu", "1", f"ProfilerStep#{step}", t, STEP_NS - 1000)
        for p, phase in enumerate(PHASES):
            tp = t + p * phase_ns + 500
            add("cpu", "1", phase, tp, phase_ns - 1000)  # ends 500 ns before the next
            mods = tp + 200 + np.arange(modules, dtype=np.int64) * mod_ns
            add("cpu", "1", MIDDLE[phase], mods, mod_ns - 100)
            starts = (mods[:, None] + 50 + np.arange(ops) * op_ns).ravel()
            corr = corr0 + np.arange(starts.size) + (step * 3 + p) * starts.size
            add("cpu", "1", "aten::mm", starts, int(op_ns * 0.8))
            add("runtime", "1", "cudaLaunchKernel", starts + op_ns // 10, op_ns // 10, corr)
            add("gpu", "7", "gemm_kernel", starts + op_ns // 5 + 10, int(op_ns * 0.7), corr, 0)
        add("comm", "2", "ncclDevKernel_AllReduce", t + phase_ns + phase_ns // 2, phase_ns // 2)
    return {k: np.concatenate(v) for k, v in cols.items()}


def synthetic_table(n_events: int, n_steps: int = 10, modules: int = 40) -> pd.DataFrame:
    """A trace table of about ``n_events`` nested events over 2 ranks."""
    parts = []
    for rank in (0, 1):
        ev = _rank_events(rank, n_events // 2, n_steps, modules)
        dev = ev["dev"]
        parts.append(pd.DataFrame({
            "rank": rank, "pid": np.where(dev >= 0, "0", "100"), "tid": ev["tid"],
            "track": ev["track"], "cat": np.where(dev >= 0, "kernel", "cpu_op"),
            "name": ev["name"], "ts_ns": ev["ts"], "dur_ns": ev["dur"], "step": -1, "cycle": 0,
            "corr": ev["corr"], "ext_id": -1, "device": dev, "stream": np.where(dev >= 0, 7, -1),
        }))  # fmt: skip
    df = pd.concat(parts, ignore_index=True)
    for col, dtype in COLUMNS.items():
        df[col] = df[col].astype(dtype)
    df.attrs["ranks"] = {0: {}, 1: {}}
    return df


def chrome_json(df: pd.DataFrame, path: Path) -> None:
    """The same events as a Chrome trace file (what the profiler would have written)."""
    events = [
        {"ph": "X", "cat": str(c), "name": str(n), "pid": str(p), "tid": str(t),
         "ts": ts / 1e3, "dur": d / 1e3, "args": {"correlation": int(k)}}
        for c, n, p, t, ts, d, k in zip(df["cat"], df["name"], df["pid"], df["tid"],
                                        df["ts_ns"], df["dur_ns"], df["corr"], strict=True)
    ]  # fmt: skip
    path.write_text(json.dumps({"traceEvents": events}))


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    df = synthetic_table(args.events)
    tmp = Path(tempfile.mkdtemp())
    chrome_json(df, tmp / "trace.json")
    load_before = os.getloadavg()

    def read() -> None:
        with open(tmp / "trace.json") as fh:
            json.load(fh)

    reading = timed(read, args.repeat)
    drawing = timed(lambda: plot_timeline(df).save(str(tmp / "t.png")), args.repeat)
    zooming = timed(lambda: plot_timeline(df, step=3).save(str(tmp / "z.png")), args.repeat)
    lanes = plot_timeline(df).table
    load_after = os.getloadavg()
    med, base = statistics.median(drawing), statistics.median(reading)
    print(f"{'measure':<40} {'value':>22} {'target':>8}")
    rows = [
        ("events in table", f"{len(df):,}", ""),
        ("JSON file (MB)", f"{(tmp / 'trace.json').stat().st_size / 1e6:.0f}", ""),
        ("lanes / bars drawn", f"{len(lanes)} / {int(lanes.bars.sum()):,}", ""),
        ("events merged (never dropped)", f"{int(lanes.merged.sum()):,}", ""),
        (f"json.load, median of {args.repeat} (s)",
         f"{base:.2f} [{min(reading):.2f}, {max(reading):.2f}]", ""),
        (f"timeline -> PNG, median of {args.repeat} (s)",
         f"{med:.2f} [{min(drawing):.2f}, {max(drawing):.2f}]", f"<= {TARGET_S:g}"),
        ("ratio timeline / json.load", f"{med / base:.2f}", ""),
        (f"one step (step=3) -> PNG, median of {args.repeat} (s)",
         f"{statistics.median(zooming):.2f} [{min(zooming):.2f}, {max(zooming):.2f}]", ""),
        ("load average before / after (1 min)", f"{load_before[0]:.2f} / {load_after[0]:.2f}", ""),
        ("CPUs", f"{os.cpu_count()}", ""),
        ("verdict", "PASS" if med <= TARGET_S else "FAIL", ""),
    ]  # fmt: skip
    for name, value, target in rows:
        print(f"{name:<40} {value:>22} {target:>8}")


if __name__ == "__main__":
    main()
