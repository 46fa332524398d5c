"""Device-to-host copies the host waited for, named by the host's wait, whatever their size.

A copy of a few bytes (``.item()``, ``.cpu()`` of a small tensor, a ``cudaMemcpy`` of a
flag) takes microseconds on the device, but the host that asked for it waits for all the
work queued ahead of it: its cost is the host's wait, not the copy's own time. A copy
blocks the host when its runtime call (a synchronous ``cudaMemcpy``/``hipMemcpy``, or a
blocking ``urEnqueueUSMMemcpy``), or a wait call the same thread makes after it
(:data:`WAIT_CALLS`), ends when the copy ends. The wait is that call's duration; the device
idle after it (until the device's next event) is what the wait cost the device.

>>> import pandas as pd
>>> us = 1000
>>> df = pd.DataFrame({"rank": [0] * 5, "step": [3] * 5, "tid": ["1", "1", "1", "7", "7"],
...     "track": ["cpu", "runtime", "runtime", "gpu", "memcpy"], "cat": ["cpu_op", "cuda_runtime",
...     "cuda_runtime", "kernel", "gpu_memcpy"],
...     "name": ["aten::item", "cudaMemcpyAsync", "cudaStreamSynchronize", "gemm",
...              "Memcpy DtoH (Device -> Pageable)"],
...     "ts_ns": [0, 10 * us, 20 * us, 0, 6000 * us], "dur_ns": [6100 * us, 5 * us,
...     5983 * us, 6000 * us, 2 * us], "corr": [-1, 9, 10, 8, 9], "device": [-1, -1, -1, 0, 0]})
>>> w = blocking_copies(df)
>>> w[["step", "op", "call", "host_wait_ns", "copy_ns"]].values.tolist()
[[3, 'aten::item', 'cudaStreamSynchronize', 5983000, 2000]]
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.analyses.breakdown import bare, text_test
from hpcprof_kit.traces.analyses.launch_pacing import BUSY_TRACKS, event_times, launches_of

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# device-to-host copies: Kineto's CUDA/HIP names, XPU's (``Memcpy D2M (DEVICE -> MEMORY)``)
D2H = re.compile(r"DtoH|D2H|D2M|DEVICE -> (?:HOST|MEMORY)|Device -> (?:Pageable|Pinned|Host)")
# host calls that wait for a stream or the device, after the copy's launch: CUDA and HIP
# syncs, Unified Runtime / Level Zero waits, and the synchronous copies themselves
WAIT_CALLS = re.compile(
    r"^(?:cuda|hip)(?:Device|Stream|Event)Synchronize$|^(?:cuda|hip)Memcpy(?:2D)?$"
    r"|^hipMemcpy(?:DtoH|WithStream)$|^urQueueFinish$|^urEventWait$"
    r"|^zeEventHostSynchronize$|^zeCommandQueueSynchronize$"
)
ENDS_WITH_NS = 1_000  # a call ending this close to the copy's end ended with it (clock skew)
COLUMNS = ["rank", "step", "op", "call", "ts_ns", "host_wait_ns", "copy_ns", "corr",
           "idle_after_ns"]  # fmt: skip


def blocking_copies(df: pd.DataFrame) -> pd.DataFrame:
    """One row per device-to-host copy the host waited for: the rank and step of the wait,
    the outermost host op around the copy's launch (``op``: ``aten::item``, ``aten::to``;
    the launch call's name when no op holds it), the call the host waited in (``call``),
    when it began (``ts_ns``), its duration (``host_wait_ns``), the copy's own duration
    (``copy_ns``), its correlation id and the device idle after the wait (``idle_after_ns``:
    until the next event on the device, 0 when the device is busy as the wait ends)."""
    import pandas as pd

    df = bare(df)
    device = df["device"].to_numpy(dtype=np.int64)
    track = df["track"]
    copies = np.flatnonzero(text_test(track, lambda s: s == "memcpy") & (device >= 0)
                            & text_test(df["name"], lambda s: s.str.contains(D2H)))  # fmt: skip
    if not copies.size:
        return pd.DataFrame(columns=COLUMNS)
    t = event_times(df)
    rank, ts, end, corr, step, runtime = (t[k] for k in ("rank", "ts", "end", "corr", "step",
                                                         "runtime"))  # fmt: skip
    name = df["name"].astype(str).to_numpy()
    host = device < 0
    wanted = launches_of(copies, runtime, rank, corr).tolist()
    if max(wanted) < 0:
        return pd.DataFrame(columns=COLUMNS)
    tid = df["tid"].astype(str).to_numpy()
    waits = _by_thread(runtime[text_test(df["name"], lambda s: s.str.contains(WAIT_CALLS))[
        runtime]], rank, tid, ts)  # fmt: skip
    ops = _by_thread(np.flatnonzero(text_test(df["cat"], lambda s: s == "cpu_op") & host),
                     rank, tid, ts)  # fmt: skip
    busy = np.flatnonzero(text_test(track, lambda s: s.isin(BUSY_TRACKS)) & (device >= 0))
    devices = {r: (ts[rows], np.maximum.accumulate(end[rows]))
               for r, rows in _by_thread(busy, rank, None, ts).items()}  # fmt: skip
    out = []
    for c, launch in zip(copies, wanted, strict=True):
        if launch < 0:
            continue
        thread = (int(rank[launch]), tid[launch])
        held = _held_by(launch, c, waits.get(thread, copies[:0]), ts, end)
        if held is None:
            continue
        out.append((int(rank[held]), int(step[held]),
                    _outermost(launch, ops.get(thread, copies[:0]), ts, end, name),
                    name[held], int(ts[held]), int(end[held] - ts[held]), int(end[c] - ts[c]),
                    int(corr[c]), _idle_after(devices.get(int(rank[c])),
                    int(end[held]))))  # fmt: skip
    return pd.DataFrame(out, columns=COLUMNS)


def _by_thread(rows: np.ndarray, rank: np.ndarray, tid: np.ndarray | None,
               ts: np.ndarray) -> dict:  # fmt: skip
    """``rows`` by (rank, thread), or by rank when ``tid`` is None, each in start order: one
    sort and one split, not a pass per group."""
    if not rows.size:
        return {}
    if tid is None:
        keys = rank[rows]
    else:  # (rank, thread) as one number: the thread's code among the rows' threads
        _, code = np.unique(tid[rows], return_inverse=True)
        keys = rank[rows] * (int(code.max()) + 1) + code
    order = np.lexsort((ts[rows], keys))
    rows, keys = rows[order], keys[order]
    cut = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    out = {}
    for part in np.split(rows, cut):
        first = int(part[0])
        out[int(rank[first]) if tid is None else (int(rank[first]), str(tid[first]))] = part
    return out


def _held_by(launch: int, copy: int, waits: np.ndarray, ts, end) -> int | None:
    """The call the host waited in for ``copy``: its launch call when it ends with the copy,
    else the first wait call of the launching thread, from the launch on, that does."""
    if end[launch] >= end[copy] - ENDS_WITH_NS:
        return launch
    mine = waits[(ts[waits] >= ts[launch]) & (ts[waits] <= end[copy])
                 & (end[waits] >= end[copy] - ENDS_WITH_NS)]  # fmt: skip
    return int(mine[0]) if mine.size else None


def _outermost(launch: int, ops: np.ndarray, ts, end, name) -> str:
    """The longest host op of the launching thread around the launch call."""
    around = ops[(ts[ops] <= ts[launch]) & (end[ops] >= end[launch])]
    if not around.size:
        return str(name[launch])
    return str(name[around[np.argmax(end[around] - ts[around])]])


def _idle_after(device: tuple[np.ndarray, np.ndarray] | None, t: int) -> int:
    """The device idle from ``t`` to its next event, 0 while it is busy at ``t``;
    ``device``: its events' starts, in order, and the running latest end."""
    if device is None:
        return 0
    starts, reach = device
    i = int(np.searchsorted(starts, t, side="right"))
    if i and reach[i - 1] > t:
        return 0
    return int(starts[i] - t) if i < starts.size else 0
