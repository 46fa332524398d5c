"""Benchmark: render a timeline of 1 M events to PNG (target: <= 3 s on a 2-core machine).

Builds a synthetic trace table directly (2 ranks x cpu/runtime/gpu/comm lanes, 1 M events,
many of them far below one pixel wide) and times ``plot_timeline`` + ``savefig``.

    python benchmarks/bench_timeline.py [--events 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hpcprof_kit.traces.plots import plot_timeline  # noqa: E402
from hpcprof_kit.traces.schema import COLUMNS  # noqa: E402

TARGET_S = 3.0


def synthetic_table(n_events: int, n_steps: int = 10, seed: int = 0) -> pd.DataFrame:
    """A trace table of ``n_events`` events over 2 ranks, with ProfilerStep spans."""
    rng = np.random.default_rng(seed)
    tracks = np.array(["cpu", "runtime", "gpu", "comm"])
    rank = rng.integers(0, 2, n_events).astype("int32")
    track = tracks[rng.integers(0, 4, n_events)]
    span_ns = 2_000_000_000  # 2 s of trace; one pixel of a 1200 px timeline is 1.7 ms
    # bursts of 0.5 ms every 3 ms (busy phases and gaps a learner can see), each burst holding
    # a few hundred microsecond-long events that fall far below one pixel
    period, burst = 3_000_000, 500_000
    bursts = rng.integers(0, span_ns // period, n_events)
    ts = np.sort(bursts * period + rng.integers(0, burst, n_events)).astype("int64")
    dur = rng.integers(500, 20_000, n_events).astype("int64")
    step_len = span_ns // n_steps
    step_ts = np.arange(n_steps, dtype="int64") * step_len
    names = ["aten::mm", "cudaLaunchKernel", "gemm", "ncclDevKernel_AllReduce"]
    name = np.array(names)[np.searchsorted(tracks, track, sorter=np.argsort(tracks))]
    df = pd.DataFrame(
        {
            "rank": np.concatenate([rank, np.repeat(np.array([0, 1], "int32"), n_steps)]),
            "pid": "1",
            "tid": "1",
            "track": np.concatenate([track, np.full(2 * n_steps, "cpu")]),
            "cat": "cpu_op",
            "name": np.concatenate([name, [f"ProfilerStep#{i}" for i in range(n_steps)] * 2]),
            "ts_ns": np.concatenate([ts, step_ts, step_ts]),
            "dur_ns": np.concatenate([dur, np.full(2 * n_steps, step_len)]),
            "step": -1,
            "cycle": 0,
            "corr": -1,
            "ext_id": -1,
            "device": np.where(
                np.concatenate([track, np.full(2 * n_steps, "cpu")]) == "gpu", 0, -1
            ),
            "stream": -1,
        }
    )
    for col, dtype in COLUMNS.items():
        df[col] = df[col].astype(dtype)
    df.attrs["ranks"] = {0: {}, 1: {}}
    return df


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    df = synthetic_table(args.events)
    out = Path(tempfile.mkdtemp()) / "timeline.png"
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        plot = plot_timeline(df)
        plot.save(str(out))
        times.append(time.perf_counter() - t)
    best, size = min(times), os.path.getsize(out)
    lanes = plot.table
    print(f"{'measure':<34} {'value':>14} {'target':>10}")
    print(f"{'events in table':<34} {len(df):>14,} {'':>10}")
    print(f"{'lanes / bars drawn':<34} {f'{len(lanes)} / {int(lanes.bars.sum()):,}':>14} {'':>10}")
    print(f"{'events merged (never dropped)':<34} {int(lanes.merged.sum()):>14,} {'':>10}")
    print(
        f"{'timeline -> PNG, best of ' + str(args.repeat) + ' (s)':<34} {best:>14.2f} {'<= ' + str(TARGET_S):>10}"
    )
    print(f"{'PNG size (kB)':<34} {size / 1e3:>14.0f} {'':>10}")
    print(f"{'verdict':<34} {'PASS' if best <= TARGET_S else 'FAIL':>14} {'':>10}")


if __name__ == "__main__":
    main()
