"""Launch pacing: the device idle just before each tiny kernel, when nothing at all ran on
that device, on any of its streams.

A tiny kernel (under :data:`TINY_KERNEL_NS`) that starts shortly after the device ran out
of work (a gap under :data:`LAUNCH_GAP_NS`) was paced by its launch, not by its work. The gap
counts from the end of whatever last ran on the device, whichever stream it ran on:
collectives (NCCL, RCCL, oneCCL kernels), copies and sets keep the device busy as kernels
do. Measured on the kernel's own stream alone, a gap an all-reduce or a copy filled would
count as idle, and the launch-bound time could exceed the step's measured device idle.

>>> import pandas as pd
>>> df = pd.DataFrame({"rank": [0] * 4, "step": [1] * 4, "device": [0] * 4,
...     "track": ["gpu", "gpu", "comm", "gpu"], "ts_ns": [0, 15_000, 16_000, 40_000],
...     "dur_ns": [5_000, 5_000, 24_000, 5_000]})
>>> launch_gaps(df)[["rank", "step", "launch_idle_ns", "tiny_kernels"]].values.tolist()
[[0, 1, 10000, 1]]

The second kernel waited 10 µs for its launch after the first ended; the third started as
the collective, on another stream, ended: the device was never idle before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.analyses.breakdown import bare, text_test

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

TINY_KERNEL_NS = 20_000  # a kernel this short is paced by its launch, not by its work
LAUNCH_GAP_NS = 500_000  # a longer gap before a tiny kernel is a pause, not a launch
BUSY_TRACKS = ("gpu", "comm", "memcpy", "memset")  # what keeps a device busy
COLUMNS = ["rank", "step", "launch_idle_ns", "tiny_kernels"]


def launch_gaps(df: pd.DataFrame) -> pd.DataFrame:
    """Per rank and step (the tiny kernel's), the device idle just before its tiny kernels
    (``launch_idle_ns``: each gap since anything last ran on the kernel's device, counted
    when it is under :data:`LAUNCH_GAP_NS`) and how many tiny kernels had such a gap
    (``tiny_kernels``)."""
    import pandas as pd

    df = bare(df)
    device = df["device"].to_numpy()
    busy = text_test(df["track"], lambda s: s.isin(BUSY_TRACKS)) & (device >= 0)
    kernel = text_test(df["track"], lambda s: s == "gpu") & (device >= 0)
    rows = np.flatnonzero(busy)
    if not rows.size:
        return pd.DataFrame(columns=COLUMNS)

    def picked(column: str) -> np.ndarray:  # the busy rows alone, as int64: no whole copies
        return df[column].to_numpy()[rows].astype(np.int64)

    rank, ts, dev, step = picked("rank"), picked("ts_ns"), picked("device"), picked("step")
    end = ts + picked("dur_ns")
    tiny = kernel[rows] & (end - ts < TINY_KERNEL_NS)
    # by (rank, device), then start: what ran before each event on its device
    order = np.lexsort((ts, dev, rank))
    rank, dev, ts, end, step, tiny = (a[order] for a in (rank, dev, ts, end, step, tiny))
    first = np.ones(rows.size, dtype=bool)
    first[1:] = (rank[1:] != rank[:-1]) | (dev[1:] != dev[:-1])
    group = np.cumsum(first) - 1
    # the device's reach before each event: the latest end of the events that started before
    # (each device's ends lifted above the previous device's, so one running max serves all)
    base = int(ts.min())
    lift = group * (int(end.max()) - base + 1)
    reach = np.maximum.accumulate(end - base + lift) - lift + base
    gap = np.zeros(rows.size, dtype=np.int64)
    gap[1:] = ts[1:] - reach[:-1]
    paced = tiny & ~first & (gap > 0) & (gap < LAUNCH_GAP_NS)
    frame = pd.DataFrame({"rank": rank[paced], "step": step[paced],
                          "launch_idle_ns": gap[paced], "tiny_kernels": 1})  # fmt: skip
    out = frame.groupby(["rank", "step"], as_index=False)[["launch_idle_ns", "tiny_kernels"]]
    return out.sum()[COLUMNS]


def event_times(df) -> dict[str, np.ndarray]:
    """A bare table's per-row ``rank``, ``ts``, ``end``, ``corr`` and ``step`` (int64), and
    ``runtime``: the rows of host runtime calls (launches, copies, waits), what pairing device
    events with their launches (:func:`launches_of`) reads."""
    from hpcprof_kit.traces.analyses.breakdown import text_test

    ts = df["ts_ns"].to_numpy(dtype=np.int64)
    host = df["device"].to_numpy(dtype=np.int64) < 0
    return {
        "rank": df["rank"].to_numpy(dtype=np.int64),
        "ts": ts,
        "end": ts + df["dur_ns"].to_numpy(dtype=np.int64),
        "corr": df["corr"].to_numpy(dtype=np.int64),
        "step": df["step"].to_numpy(dtype=np.int64),
        "runtime": np.flatnonzero(text_test(df["track"], lambda s: s == "runtime") & host),
    }


def launches_of(wanted: np.ndarray, calls: np.ndarray, rank: np.ndarray,
                corr: np.ndarray) -> np.ndarray:  # fmt: skip
    """For each row of ``wanted`` (device events), the row among ``calls`` (runtime calls)
    with its rank and correlation id, -1 where none: one sort, no dict of every call.

    >>> launches_of(np.array([2, 3]), np.array([0, 1]), np.array([0, 0, 0, 0]),
    ...             np.array([7, 8, 8, 9])).tolist()
    [1, -1]
    """
    calls = calls[corr[calls] >= 0]
    out = np.full(wanted.size, -1, dtype=np.int64)
    if not calls.size or not wanted.size:
        return out
    key = (rank[calls] << 40) | corr[calls]
    order = np.argsort(key, kind="stable")
    key, calls = key[order], calls[order]
    want = (rank[wanted] << 40) | corr[wanted]
    at = np.minimum(np.searchsorted(key, want), key.size - 1)
    hit = (key[at] == want) & (corr[wanted] >= 0)
    out[hit] = calls[at[hit]]
    return out
