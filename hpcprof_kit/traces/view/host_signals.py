"""The signals of a rank that has no device (a CPU-only run), where the aten ops are the work
itself: the loops of tiny host ops (each op's time is its dispatch, not its arithmetic) and
the large host blocks allocated and freed inside one step (the ``[memory]`` events of
``profile_memory=True``).

>>> import numpy as np
>>> outermost(np.array([0, 0, 0]), np.array([0, 1, 12]), np.array([10, 2, 14]))
array([ True, False,  True])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.analyses.breakdown import text_test

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

TINY_OP_NS = 25_000  # a host op this short is its dispatch: eager PyTorch spends a few µs
# each, 6-15 µs with the profiler recording it (14 µs for an 8-element mul_ on a loaded 2-core
# machine, where a 10 µs line let the whole loop through)
# (by the median call of its name: a call the OS preempted is still one of the loop's)
LOOP_GAP_NS = 10_000  # Python between two tiny ops of one loop; a longer gap ends the loop
# a host block this large is above glibc's largest mmap threshold (32 MiB on 64-bit): each
# allocation is a fresh mmap whose pages fault in again on first touch, each free a munmap
CHURN_BYTES = 32 << 20


def outermost(group: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Which spans lie in no other span of their ``group`` (a thread): the outermost ops."""
    order = np.lexsort((-(end - ts), ts, group))
    g, s, e = group[order], ts[order], end[order]
    out = np.ones(order.size, dtype=bool)
    if order.size > 1:
        run_max = e.copy()
        first = np.ones(order.size, dtype=bool)
        first[1:] = g[1:] != g[:-1]
        # the latest end so far within each thread: a span starting before it is nested
        starts = np.flatnonzero(first)
        for a, b in zip(starts, [*starts[1:], order.size], strict=True):
            run_max[a:b] = np.maximum.accumulate(e[a:b])
        out[1:] = first[1:] | (s[1:] >= run_max[:-1])
    back = np.empty_like(out)
    back[order] = out
    return back


def host_ops(df: pd.DataFrame, rank: np.ndarray, dev: np.ndarray, cpu_ranks: np.ndarray):
    """Rows of the outermost host ``cpu_op`` events of the ranks in ``cpu_ranks``, and the
    thread key they were nested by."""
    ops = text_test(df["cat"], lambda s: s == "cpu_op") & ~dev & np.isin(rank, cpu_ranks)
    ops &= text_test(df["track"], lambda s: s == "cpu")
    rows = np.flatnonzero(ops)
    tid = df["tid"].astype(str).to_numpy()[rows]
    thread = np.unique(np.char.add(np.char.add(rank[rows].astype(str), ":"), tid.astype(str)),
                       return_inverse=True)[1]  # fmt: skip
    ts = df["ts_ns"].to_numpy(dtype=np.int64)[rows]
    end = ts + df["dur_ns"].to_numpy(dtype=np.int64)[rows]
    top = outermost(thread, ts, end)
    return rows[top], thread[top]


def tiny_ops(df: pd.DataFrame, rank: np.ndarray, dev: np.ndarray, cpu_ranks: np.ndarray):
    """Rows of the outermost host ops of ``cpu_ranks`` (by thread and time), their thread, and
    which are tiny: ops whose name's median call on that rank is under ``TINY_OP_NS`` (so a
    call stretched by the host preempting it still counts as the loop's)."""
    import pandas as pd

    rows, thread = host_ops(df, rank, dev, cpu_ranks)
    ts = df["ts_ns"].to_numpy(dtype=np.int64)
    order = np.lexsort((ts[rows], thread))
    rows, thread = rows[order], thread[order]
    names = df["name"].astype(str).to_numpy()[rows]
    dur = pd.Series(df["dur_ns"].to_numpy(dtype=np.int64)[rows])
    typical = dur.groupby([rank[rows], names]).transform("median").to_numpy()
    return rows, thread, typical < TINY_OP_NS


def tiny_op_loops(df, rank, step, ts, dur, dev, cpu_ranks, by) -> list:
    """Per rank and step: the calls of tiny outermost host ops (``tiny_ops``) and the host
    time they take with the Python between two of them (``tiny_op_ns``)."""
    rows, thread, tiny = tiny_ops(df, rank, dev, cpu_ranks)
    if rows.size == 0:
        return []
    gap = np.full(rows.size, -1, dtype=np.int64)
    gap[1:] = ts[rows][1:] - (ts[rows] + dur[rows])[:-1]
    follows = np.zeros(rows.size, dtype=bool)
    follows[1:] = tiny[:-1] & (thread[1:] == thread[:-1])
    loop_gap = np.where(tiny & follows & (gap >= 0) & (gap < LOOP_GAP_NS), gap, 0)
    t = rows[tiny]
    return [by(rank[t], step[t], 1, "tiny_ops"),
            by(rank[t], step[t], dur[t] + loop_gap[tiny], "tiny_op_ns")]  # fmt: skip


def churned_blocks(df, rank, step, ts, dur, dev, cpu_ranks, meta, by) -> list:
    """Per rank and step: the ``[memory]`` events seen (``memory_events``), and the host
    blocks of ``CHURN_BYTES`` or more allocated and freed within that step
    (``churn_blocks``) with the host time of the outermost ops that allocated them
    (``churn_ns``; their first touch of the fresh pages included)."""
    from hpcprof_kit.traces.analyses.memory import memory_timeline
    from hpcprof_kit.traces.read.memory_events import MEMORY_EVENT

    memory = text_test(df["name"], lambda s: s == MEMORY_EVENT) & np.isin(rank, cpu_ranks)
    if not memory.any():
        return []
    out = [by(rank[memory], step[memory], 1, "memory_events")]
    sub = df[memory]
    sub.attrs = {"ranks": meta}
    tl = memory_timeline(sub)
    tl = tl[(tl["device"] < 0) & (tl["step"] >= 0) & tl["addr"].notna()]
    big = tl[tl["bytes"].abs() >= CHURN_BYTES]
    if big.empty:
        return out
    allocs = big[big["bytes"] > 0]
    frees = big[big["bytes"] < 0]
    freed = allocs.merge(frees, on=["rank", "addr", "step"], suffixes=("", "_free"))
    freed = freed[(freed["ts_ns_free"] > freed["ts_ns"]) & (freed["bytes_free"] == -freed["bytes"])]
    freed = freed.drop_duplicates(["rank", "ts_ns", "addr"])
    if freed.empty:
        return out
    rows, _ = host_ops(df, rank, dev, cpu_ranks)
    tid = df["tid"].astype(str).to_numpy()
    costs = []
    for r, t, th in zip(freed["rank"], freed["ts_ns"], freed["tid"].astype(str), strict=True):
        mine = rows[(rank[rows] == r) & (tid[rows] == th) & (ts[rows] <= t)
                    & (ts[rows] + dur[rows] >= t)]  # fmt: skip
        costs.append(int(dur[mine].max()) if mine.size else 0)
    r, s = freed["rank"].to_numpy(np.int64), freed["step"].to_numpy(np.int64)
    return [*out, by(r, s, 1, "churn_blocks"), by(r, s, np.asarray(costs), "churn_ns")]
