"""What the host was doing while the device sat idle: each idle nanosecond of a step given to
the innermost host op running on the launching thread at that moment, counted once (an
``aten::item`` around ``aten::_local_scalar_dense`` around ``cudaStreamSynchronize`` is the
sync, not three ops), and to a cause:

- ``loader``: inside the DataLoader's ``__next__`` (whatever runs in it: loading the batch);
- ``optimizer``: inside the optimizer's step (``Optimizer.step#...``);
- ``sync``: the host waits for the device (``names.SYNC_NAMES``: a stream or device sync,
  ``.item()``, a synchronous copy);
- ``first_launch``: a kernel launch of 1 ms or more while the device idles (its module
  loaded, its code compiled: a one-time cost a warm-up step takes);
- ``alloc``: the runtime allocates or frees device memory (``names.ALLOC``);
- ``launch``: the host is launching a kernel (its launch call is the innermost op);
- ``ops``: any other host op (the host's own work: Python-level ops, their dispatch);
- ``untraced``: no traced op runs (Python between ops, garbage collection, I/O).

The first cause that holds, in that order, wins. A step's window is its ``ProfilerStep``; on
a rank without steps it runs from the first device event (start-up set apart) to the last
event's end. The launching thread is the one with the most runtime calls (else the most host
ops). Per rank and step the signals keep each cause's ns and the innermost ops' names with
their ns (the five longest), so a report of per-rank summaries reads the same.

>>> import pandas as pd
>>> df = pd.DataFrame({"rank": [0] * 6, "step": [1] * 6, "device": [-1, -1, -1, -1, 0, 0],
...     "track": ["cpu", "cpu", "cpu", "runtime", "gpu", "gpu"], "tid": ["1"] * 4 + ["7"] * 2,
...     "name": ["ProfilerStep#1", "aten::item", "aten::_local_scalar_dense",
...              "cudaStreamSynchronize", "k", "k"], "ts_ns": [0, 100, 110, 120, 0, 900],
...     "dur_ns": [1000, 700, 600, 580, 50, 100]})
>>> out = idle_host(df)  # idle 50-900: the sync 580 ns and _local_scalar_dense's own 20 (a
>>> # sync too), aten::item's own 100, nothing traced 50 before it and 100 after
>>> out[["rank", "step", "idle_sync_ns", "idle_ops_ns", "idle_untraced_ns"]].values.tolist()
[[0, 1, 600, 100, 150]]
>>> out["idle_host_ops"].tolist()
['sync|cudaStreamSynchronize=580;ops|aten::item=100;sync|aten::_local_scalar_dense=20']
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.analyses import intervals as iv
from hpcprof_kit.traces.analyses.breakdown import bare, step_spans, text_test
from hpcprof_kit.traces.view import names as N

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

CAUSES = ("loader", "optimizer", "sync", "first_launch", "alloc", "launch", "ops", "untraced")
FIRST_LAUNCH_NS = 1_000_000  # a launch this long on an idle device loads its code: once
NUMERIC = [f"idle_{c}_ns" for c in CAUSES]
COLUMNS = ["rank", "step", *NUMERIC, "idle_host_ops"]
BUSY_TRACKS = ("gpu", "comm", "memcpy", "memset")
HOST_TRACKS = ("cpu", "runtime")
TOP_OPS = 5  # innermost ops' names kept per rank and step
BATCH_OPS = 25_000  # launching-thread ops in one pass (its arrays a few MB each)
# torch.optim's own range around each step: "Optimizer.step#AdamW.step"
OPTIMIZER = re.compile(r"^Optimizer\.step#")
# the runtimes' kernel launches and graph launches
LAUNCH = re.compile(
    r"^(?:cuda|hip|cu)LaunchKernel(?:Ex(?:C)?)?(?:_ptsz)?$|^cudaLaunchCooperativeKernel"
    r"|^(?:cuda|hip)GraphLaunch$|^hip(?:Ext)?ModuleLaunchKernel$|^cuLaunchKernel"
    r"|^urEnqueueKernelLaunch$|^zeCommandListAppendLaunchKernel$"
)
_SYNC = re.compile(N.SYNC_NAMES)


def idle_host(df: pd.DataFrame) -> pd.DataFrame:
    """Per rank and step with device idle, the columns of ``COLUMNS``: the idle ns given to
    each cause of :data:`CAUSES`, and ``idle_host_ops``, the innermost host ops' names with
    their idle ns (``name=ns;...``, the :data:`TOP_OPS` longest)."""
    import pandas as pd

    df = bare(df)
    rank = df["rank"].to_numpy()  # the table's own arrays, no copies: a run has many rows
    device = df["device"].to_numpy()
    busy = text_test(df["track"], lambda s: s.isin(BUSY_TRACKS)) & (device >= 0)
    if not busy.any():
        return pd.DataFrame(columns=COLUMNS)
    ts = df["ts_ns"].to_numpy(dtype=np.int64)
    dur = df["dur_ns"].to_numpy(dtype=np.int64)
    host = text_test(df["track"], lambda s: s.isin(HOST_TRACKS)) & (device < 0) & (dur > 0)
    host &= ~text_test(df["name"], lambda s: s.str.startswith("ProfilerStep#"))
    runtime = text_test(df["track"], lambda s: s == "runtime") & (device < 0)
    tid = df["tid"]
    tid = tid.cat.codes.to_numpy() if hasattr(tid, "cat") else pd.factorize(tid)[0]
    codes, labels = _codes(df["name"])
    # every rank in a block of time of its own, every launching thread in one of its own:
    # one pass over a batch of ranks, not one per rank; batches keep the pass's arrays small
    base, span = int(ts.min()), int(max((ts + dur).max(), ts.max()) - ts.min()) + 1
    spans = step_spans(df)
    on = np.flatnonzero(busy)
    ranks = np.unique(rank[on]).astype(np.int64)
    ops = np.flatnonzero(host & np.isin(rank, ranks))
    ops = ops[_launching(rank[ops], tid[ops], runtime[ops])]
    frames = []
    for batch in _batches(ranks, rank[ops]):
        mine = spans[np.isin(spans["rank"].to_numpy(), batch)]
        rows = (on[np.isin(rank[on], batch)], ops[np.isin(rank[ops], batch)])
        frames.append(_batch(batch, mine, rows, rank, tid, ts, dur, codes, labels, base, span))
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def _batches(ranks: np.ndarray, op_rank: np.ndarray) -> list[np.ndarray]:
    """The ranks in batches of about :data:`BATCH_OPS` launching-thread ops each."""
    per = np.bincount(np.searchsorted(ranks, op_rank), minlength=ranks.size)
    cut = np.flatnonzero(np.diff(np.cumsum(per) // BATCH_OPS)) + 1
    return np.split(ranks, cut)


def _batch(ranks, spans, rows, rank, tid, ts, dur, codes, labels, base, span) -> pd.DataFrame:
    """:func:`_cells` of one batch of ranks: their windows (a rank without steps: its
    steady state alone, from its first device event) and their device's busy time, each
    rank in its block of time."""
    on, ops = rows
    block = np.searchsorted(ranks, rank[on])
    first_busy = np.full(ranks.size, np.iinfo(np.int64).max)
    np.minimum.at(first_busy, block, ts[on])
    w_rank = np.searchsorted(ranks, spans["rank"].to_numpy(dtype=np.int64))
    w_step = spans["step"].to_numpy(dtype=np.int64)
    w_start = spans["start_ns"].to_numpy(dtype=np.int64)
    stepless = np.ones(ranks.size, dtype=bool)
    stepless[w_rank[w_step >= 0]] = False
    w_start = np.where(stepless[w_rank], np.maximum(w_start, first_busy[w_rank]), w_start)
    shift = (w_rank * span) - base
    w_start, w_stop = w_start + shift, spans["end_ns"].to_numpy(dtype=np.int64) + shift
    order = np.argsort(w_start, kind="stable")
    w_rank, w_step, w_start, w_stop = (x[order] for x in (w_rank, w_step, w_start, w_stop))
    b_start = ts[on] - base + block * span
    b_start, b_end = iv.union(b_start, b_start + dur[on])
    o_block = np.searchsorted(ranks, rank[ops])
    return _cells(ranks, span, base, (w_rank, w_step, w_start, w_stop), (b_start, b_end), ops,
                  o_block, tid, ts, dur, codes, labels)  # fmt: skip


def _codes(column: pd.Series) -> tuple[np.ndarray, list[str]]:
    """A text column as integer codes (the table's own, -1: missing) and the text of each
    code, the last one "nan" for the missing."""
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(), [*(str(c) for c in column.cat.categories), "nan"]
    codes, uniques = pd.factorize(column.astype(str))
    return codes, [*(str(c) for c in uniques), "nan"]


def _launching(rank: np.ndarray, tid: np.ndarray, runtime: np.ndarray) -> np.ndarray:
    """Which of these host ops are on a launching thread of their rank: a thread with a
    runtime call, else, on a rank without any, its thread with the most ops (the first by
    thread id of those)."""
    if not rank.size:
        return np.zeros(0, dtype=bool)
    width = int(tid.max(initial=0)) + 1
    threads, which = np.unique(rank.astype(np.int64) * width + tid, return_inverse=True)
    which = which.reshape(-1)
    calls = np.bincount(which, weights=runtime.astype(np.int64), minlength=threads.size)
    size = np.bincount(which, minlength=threads.size)
    t_rank = threads // width
    heads = np.flatnonzero(np.append(True, t_rank[1:] != t_rank[:-1]))  # threads by rank
    group = np.repeat(np.arange(heads.size), np.diff(np.append(heads, threads.size)))
    has_calls = np.maximum.reduceat(calls, heads)[group] > 0
    busiest = size == np.maximum.reduceat(size, heads)[group]
    before = np.cumsum(busiest) - np.repeat(np.cumsum(busiest)[heads] - busiest[heads],
                                            np.diff(np.append(heads, threads.size)))  # fmt: skip
    keep = (has_calls & (calls > 0)) | (~has_calls & busiest & (before == 1))
    return keep[which]


def _cells(ranks, span, base, windows, busy, ops, o_block, tid, ts, dur, codes,
           labels) -> pd.DataFrame:  # fmt: skip
    """Each window's idle split by cause and innermost op. Of a rank's launching threads,
    each moment goes to the thread that began an op last, the one at work, and to its
    innermost op running (none: untraced). A main thread blocked in ``## backward ##``
    while the autograd thread launches the backward's kernels gives the moment to the
    latter, between its ops too."""
    import pandas as pd

    w_rank, w_step, w_start, w_stop = windows
    b_start, b_end = busy
    shift = o_block * span - base  # the ops in their rank's block
    o_ts = ts[ops] + shift
    o_end = o_ts + dur[ops]
    # every moment the innermost op, the device's state or the window can change
    cuts = np.sort(np.concatenate([o_ts, o_end, b_start, b_end, w_start, w_stop]))
    cuts = cuts[np.append(True, cuts[1:] != cuts[:-1])]  # distinct (a sort: np.unique hashes)
    at, length = cuts[:-1], np.diff(cuts)
    w = np.searchsorted(w_start, at, side="right") - 1
    inside = (w >= 0) & (at < w_stop[np.maximum(w, 0)])
    j = np.searchsorted(b_start, at, side="right") - 1
    idle = inside & ~((j >= 0) & (at < b_end[np.maximum(j, 0)]))
    at, length, w = at[idle], length[idle], w[idle]
    if not at.size:
        return pd.DataFrame(columns=COLUMNS)
    # each (rank, thread) in a block of its own; each moment asked of each of its rank's threads
    width = int(tid.max(initial=0)) + 1
    thread_key = o_block * width + tid[ops]
    threads, t_of = np.unique(thread_key, return_inverse=True)
    t_rank = threads // width
    t_shift = np.arange(threads.size) * span - t_rank * span  # rank block -> thread block
    order = np.lexsort((o_ts - o_end, o_ts + t_shift[t_of]))  # by block, start; outer first
    q_ts, q_end, q_thread = (o_ts + t_shift[t_of])[order], (o_end + t_shift[t_of])[order], t_of[
        order]  # fmt: skip
    per_rank = np.bincount(t_rank, minlength=ranks.size)
    m_rank = w_rank[w]
    reps = per_rank[m_rank]
    first_thread = np.concatenate([[0], np.cumsum(per_rank)[:-1]])[m_rank]
    chosen = np.full(at.size, -1)
    if reps.max(initial=0) <= 1:  # one launching thread a rank, the common case: no choice
        asked = np.flatnonzero(reps == 1)
        thread = first_thread[asked]
        found = _innermost(q_ts, q_end, at[asked] + t_shift[thread])
        ok = (found >= 0) & (q_thread[np.maximum(found, 0)] == thread)
        chosen[asked] = np.where(ok, found, -1)
    else:
        chosen = _busiest_thread(at, reps, first_thread, t_shift, q_ts, q_end, q_thread, chosen)
    inner = np.where(chosen >= 0, order[np.maximum(chosen, 0)], -1)  # a position in ops
    traced = inner >= 0
    op_codes = codes[ops].astype(np.int64)
    distinct, code = np.unique(np.where(op_codes < 0, len(labels) - 1, op_codes),
                               return_inverse=True)  # fmt: skip
    kinds = [labels[c] for c in distinct.tolist()]
    name = np.where(traced, code[np.maximum(inner, 0)] if code.size else 0, -1)
    cause = np.where(traced, CAUSES.index("ops"), CAUSES.index("untraced"))
    for c, pattern in (("launch", LAUNCH), ("alloc", N.ALLOC), ("sync", _SYNC)):
        said = np.array([bool(pattern.search(k)) for k in kinds] + [False], dtype=bool)
        cause[said[name]] = CAUSES.index(c)  # name -1 (none) takes the last slot
    launch = cause == CAUSES.index("launch")
    held = ops[np.maximum(inner, 0)] if ops.size else inner
    long = launch & (dur[held] >= FIRST_LAUNCH_NS) if ops.size else launch
    cause[long] = CAUSES.index("first_launch")
    for c, pattern in (("optimizer", OPTIMIZER), ("loader", N.LOADER)):
        said = np.array([bool(pattern.search(k)) for k in kinds], dtype=bool)
        within = said[code] if code.size else np.zeros(0, dtype=bool)
        s, e = iv.union(o_ts[within], o_end[within])
        if not s.size:
            continue
        k = np.searchsorted(s, at, side="right") - 1
        cause[(k >= 0) & (at < e[np.maximum(k, 0)])] = CAUSES.index(c)
    # moments in a row of one window, cause and op are one (an op spans many moments)
    head = np.flatnonzero(np.append(True, (w[1:] != w[:-1]) | (cause[1:] != cause[:-1])
                                    | (name[1:] != name[:-1])))  # fmt: skip
    length = np.add.reduceat(length, head)
    w, cause, name, traced = w[head], cause[head], name[head], traced[head]
    cells = w[np.append(True, w[1:] != w[:-1])]  # w rises with at
    slot = np.searchsorted(cells, w) * len(CAUSES) + cause
    ns = np.bincount(slot, weights=length, minlength=cells.size * len(CAUSES))
    out = pd.DataFrame(ns.reshape(cells.size, len(CAUSES)).astype(np.int64), columns=NUMERIC)
    out.insert(0, "step", w_step[cells])
    out.insert(0, "rank", ranks[w_rank[cells]])
    out["idle_host_ops"] = _top_ops(w[traced], cause[traced], name[traced], length[traced],
                                    kinds, cells)  # fmt: skip
    return out[COLUMNS]


def _busiest_thread(at, reps, first_thread, t_shift, q_ts, q_end, q_thread, chosen):
    """Each moment's innermost op on the launching thread of its rank that began an op last
    (``reps`` threads a moment, from ``first_thread``), -1 where it runs none."""
    moment = np.repeat(np.arange(at.size), reps)
    thread = np.repeat(first_thread, reps) + (np.arange(moment.size) - np.repeat(
        np.cumsum(reps) - reps, reps))  # fmt: skip
    q_at = at[moment] + t_shift[thread]
    found = _innermost(q_ts, q_end, q_at)
    found = np.where((found >= 0) & (q_thread[np.maximum(found, 0)] == thread), found, -1)
    last = np.searchsorted(q_ts, q_at, side="right") - 1
    ok = (last >= 0) & (q_thread[np.maximum(last, 0)] == thread)
    when = np.where(ok, q_ts[np.maximum(last, 0)] - t_shift[thread], np.iinfo(np.int64).min)
    pick = np.lexsort((when, moment))  # per moment, the thread that began last comes last
    tail = np.flatnonzero(np.append(moment[pick][1:] != moment[pick][:-1], True))
    chosen[moment[pick][tail]] = found[pick][tail]
    return chosen


def _top_ops(w, cause, name, length, kinds, cells) -> list[str]:
    """Per cell, its :data:`TOP_OPS` longest (cause, innermost op) pairs as
    ``cause|name=ns;...`` (ties: by cause, then name)."""
    if not w.size:
        return [""] * cells.size
    alphabetical = np.argsort(np.argsort(np.array(kinds, dtype=object)))
    # one key per (cell, cause, op), summed in C; ops by their alphabetical rank
    alpha = alphabetical[name]
    key = (w.astype(np.int64) * len(CAUSES) + cause) * max(len(kinds), 1) + alpha
    if (int(w.max()) + 1) * len(CAUSES) * max(len(kinds), 1) <= max(4 * key.size, 1 << 20):
        sums = np.bincount(key, weights=length)  # few ops' names: every key has its slot
        keys = np.flatnonzero(sums)  # every moment lasts > 0 ns: a key met is a key summed
        total = sums[keys].astype(np.int64)
    else:
        keys, which = np.unique(key, return_inverse=True)
        total = np.bincount(which.reshape(-1), weights=length).astype(np.int64)
    k_alpha = keys % max(len(kinds), 1)
    k_cause = keys // max(len(kinds), 1) % len(CAUSES)
    k_w = keys // (max(len(kinds), 1) * len(CAUSES))
    order = np.lexsort((k_alpha, k_cause, -total, k_w))  # per cell: longest, cause, name
    k_w, k_cause, k_alpha, total = k_w[order], k_cause[order], k_alpha[order], total[order]
    first = np.flatnonzero(np.append(True, k_w[1:] != k_w[:-1]))
    nth = np.arange(k_w.size) - np.repeat(first, np.diff(np.append(first, k_w.size)))
    keep = nth < TOP_OPS
    by_alpha = np.empty(len(kinds), dtype=np.int64)
    by_alpha[alphabetical] = np.arange(len(kinds))
    text: dict[int, list[str]] = {}
    for wi, c, a, v in zip(k_w[keep].tolist(), k_cause[keep].tolist(),
                           by_alpha[k_alpha[keep]].tolist(), total[keep].tolist(), strict=True):  # fmt: skip
        text.setdefault(wi, []).append(f"{CAUSES[c]}|{kinds[a]}={v}")
    return [";".join(text.get(int(c), [])) for c in cells.tolist()]


def _innermost(o_ts: np.ndarray, o_end: np.ndarray, at: np.ndarray) -> np.ndarray:
    """For each moment ``at``, the last op (in start order, the outer op first) that began
    at or before it and has not ended: the innermost one running, -1 where none. The ops
    that ended are skipped by binary lifting over a table of running maxima of their ends,
    not one at a time; the table grows only as far as the moments need (ops nest a few
    deep, so a moment rarely skips more than a few)."""
    pos = np.searchsorted(o_ts, at, side="right") - 1
    out = np.full(at.size, -1, dtype=np.int64)
    if not o_ts.size:
        return out
    reach = [o_end]  # reach[k][i]: the latest end among ops i - 2^k + 1 .. i
    # the smallest k whose window ending at the moment's op holds one still running
    level = np.full(at.size, -1, dtype=np.int64)
    ever = np.maximum.accumulate(o_end)  # no op before the moment's still runs: none
    todo = np.flatnonzero((pos >= 0) & (ever[np.maximum(pos, 0)] > at))
    while todo.size:
        k = len(reach) - 1
        hit = reach[k][pos[todo]] > at[todo]
        level[todo[hit]] = k
        todo = todo[~hit]
        if not todo.size or (1 << k) > o_ts.size:
            break
        step = 1 << k
        prev = reach[-1]
        reach.append(np.maximum(prev, np.concatenate([np.full(step, -1), prev[:-step]])))
    found = np.flatnonzero(level >= 0)
    p, lv, t = pos[found], level[found], at[found]
    p = np.where(lv > 0, p - (1 << np.maximum(lv - 1, 0)), p)  # the block known ended
    for k in range(len(reach) - 2, -1, -1):
        ask = lv - 2 >= k  # within the block of level lv, halves from 2^(lv-2) down
        ended = ask & (reach[k][np.maximum(p, 0)] <= t)
        p = np.where(ended, p - (1 << k), p)
    out[found] = p
    return out


def idle_by_cause(frame: pd.DataFrame) -> dict[str, float]:
    """Each cause's idle ns summed over ``frame``'s rows (signals' columns of ``NUMERIC``)."""
    return {c: float(frame[f"idle_{c}_ns"].sum()) for c in CAUSES}


def innermost_by_cause(texts) -> dict[str, dict[str, int]]:
    """The ``idle_host_ops`` texts added up by cause, read once: cause -> op name -> idle ns.

    >>> innermost_by_cause(["alloc|cudaFree=5;ops|aten::add=2", "alloc|cudaFree=1"])
    {'alloc': {'cudaFree': 6}, 'ops': {'aten::add': 2}}
    """
    out: dict[str, dict[str, int]] = {}
    texts = texts.tolist() if hasattr(texts, "tolist") else texts
    for part in ";".join(str(t) for t in texts if t).split(";"):  # every cell's parts at once
        if not part:
            continue
        said, _, ns = part.rpartition("=")
        kind, _, name = said.partition("|")
        ops = out.setdefault(kind, {})
        ops[name] = ops.get(name, 0) + int(ns)
    return out
