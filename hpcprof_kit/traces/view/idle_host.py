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
    rank = df["rank"].to_numpy(dtype=np.int64)
    device = df["device"].to_numpy(dtype=np.int64)
    busy = text_test(df["track"], lambda s: s.isin(BUSY_TRACKS)) & (device >= 0)
    if not busy.any():
        return pd.DataFrame(columns=COLUMNS)
    ts = df["ts_ns"].to_numpy(dtype=np.int64)
    end = ts + df["dur_ns"].to_numpy(dtype=np.int64)
    host = text_test(df["track"], lambda s: s.isin(HOST_TRACKS)) & (device < 0) & (end > ts)
    host &= ~text_test(df["name"], lambda s: s.str.startswith("ProfilerStep#"))
    runtime = text_test(df["track"], lambda s: s == "runtime") & (device < 0)
    tid = df["tid"]
    tid = tid.cat.codes.to_numpy() if hasattr(tid, "cat") else pd.factorize(tid)[0]
    spans = step_spans(df)
    names = _codes(df["name"])
    kept = np.flatnonzero(busy | host)
    by_rank = np.split(kept[np.argsort(rank[kept], kind="stable")],
                       np.flatnonzero(np.diff(np.sort(rank[kept]))) + 1)  # fmt: skip
    rows: list[tuple] = []
    for part in by_rank:
        r = int(rank[part[0]])
        on = part[busy[part]]
        if not on.size:
            continue
        windows = spans[spans["rank"].to_numpy() == r]
        start = windows["start_ns"].to_numpy(dtype=np.int64)
        if (windows["step"].to_numpy() < 0).all():  # no steps: the steady state alone
            start = np.maximum(start, int(ts[on].min()))
        stop = windows["end_ns"].to_numpy(dtype=np.int64)
        ops = part[host[part]]
        launching = np.unique(tid[ops[runtime[ops]]]) if runtime[ops].any() else None
        if launching is None and ops.size:  # no runtime calls: the busiest thread
            codes, counts = np.unique(tid[ops], return_counts=True)
            launching = codes[[np.argmax(counts)]]
        threads = [ops[tid[ops] == t] for t in (launching if launching is not None else [])]
        rows += _cells(r, windows["step"].to_numpy(dtype=np.int64), start, stop,
                       iv.union(ts[on], end[on]), threads, ts, end, names)  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def _codes(column: pd.Series) -> tuple[np.ndarray, list[str]]:
    """A text column as integer codes and the text of each code (-1, missing: "nan")."""
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy().astype(np.int64)
        labels = [str(c) for c in column.cat.categories]
    else:
        codes, uniques = pd.factorize(column.astype(str))
        labels = [str(c) for c in uniques]
    return np.where(codes < 0, len(labels), codes), [*labels, "nan"]


def _cells(rank: int, steps, start, stop, busy, threads, ts, end, names) -> list[tuple]:
    """The rows of one rank: each window's idle split by cause and innermost op. Of the
    launching ``threads`` (their op rows), each moment goes to the thread that began an op
    last, the one at work, and to its innermost op running (none: untraced). A main thread
    blocked in ``## backward ##`` while the autograd thread launches the backward's kernels
    gives the moment to the latter, between its ops too."""
    b_start, b_end = busy
    ops = np.concatenate(threads) if threads else np.zeros(0, dtype=np.int64)
    # the ops' names as codes into their distinct names, each name tested once
    codes, labels = names
    distinct, code = np.unique(codes[ops], return_inverse=True)
    kinds = [labels[c] for c in distinct.tolist()]
    # every moment the innermost op, the device's state or the window can change
    cuts = np.unique(np.concatenate([ts[ops], end[ops], b_start, b_end, start, stop]))
    at, length = cuts[:-1], np.diff(cuts)
    w = np.searchsorted(start, at, side="right") - 1
    inside = (w >= 0) & (at < stop[np.maximum(w, 0)])
    j = np.searchsorted(b_start, at, side="right") - 1
    idle = inside & ~((j >= 0) & (at < b_end[np.maximum(j, 0)]))
    at, length, w = at[idle], length[idle], w[idle]
    if not at.size:
        return []
    inner = np.full(at.size, -1)  # a position in ops
    began = np.full(at.size, np.iinfo(np.int64).min)
    first = 0
    for rows in threads:
        order = np.lexsort((ts[rows] - end[rows], ts[rows]))  # by start, the outer op first
        o_ts = ts[rows][order]
        found = _innermost(o_ts, end[rows][order], at)
        # the thread's latest op start: the thread that began something last is at work
        last = np.searchsorted(o_ts, at, side="right") - 1
        when = np.where(last >= 0, o_ts[np.maximum(last, 0)], np.iinfo(np.int64).min)
        later = when > began
        pos = np.where(found >= 0, first + order[np.maximum(found, 0)], -1)
        inner[later], began[later] = pos[later], when[later]
        first += rows.size
    traced = inner >= 0
    name = np.where(traced, code[np.maximum(inner, 0)] if code.size else 0, -1)
    cause = np.where(traced, CAUSES.index("ops"), CAUSES.index("untraced"))
    for c, pattern in (("launch", LAUNCH), ("alloc", N.ALLOC), ("sync", _SYNC)):
        said = np.array([bool(pattern.search(k)) for k in kinds] + [False], dtype=bool)
        cause[said[name]] = CAUSES.index(c)  # name -1 (none) takes the last slot
    launch = cause == CAUSES.index("launch")
    held = ops[np.maximum(inner, 0)] if ops.size else inner
    long = launch & ((end[held] - ts[held]) >= FIRST_LAUNCH_NS) if ops.size else launch
    cause[long] = CAUSES.index("first_launch")
    for c, pattern in (("optimizer", OPTIMIZER), ("loader", N.LOADER)):
        said = np.array([bool(pattern.search(k)) for k in kinds], dtype=bool)
        within = said[code] if code.size else np.zeros(0, dtype=bool)
        s, e = iv.union(ts[ops][within], end[ops][within])
        if not s.size:
            continue
        k = np.searchsorted(s, at, side="right") - 1
        cause[(k >= 0) & (at < e[np.maximum(k, 0)])] = CAUSES.index(c)
    out = []
    width = len(kinds) + 1
    alphabetical = np.append(np.argsort(np.argsort(np.array(kinds, dtype=object))), len(kinds))
    for i in np.unique(w).tolist():
        cell = w == i
        ns = np.bincount(cause[cell], weights=length[cell], minlength=len(CAUSES))
        mine = cell & traced
        top = ""
        if mine.any():  # per cause and innermost op
            key = cause[mine] * width + name[mine]
            total = np.bincount(key, weights=length[mine], minlength=len(CAUSES) * width)
            held = np.flatnonzero(total > 0)
            by_name = (held // width) * width + alphabetical[held % width]  # ties: by cause, name
            best = held[np.lexsort((by_name, -total[held]))]
            top = ";".join(f"{CAUSES[b // width]}|{kinds[b % width]}={int(total[b])}"
                           for b in best[:TOP_OPS].tolist())  # fmt: skip
        out.append((rank, int(steps[i]), *(int(v) for v in ns), top))
    return out


def _innermost(o_ts: np.ndarray, o_end: np.ndarray, at: np.ndarray) -> np.ndarray:
    """For each moment ``at``, the last op (in start order, the outer op first) that began
    at or before it and has not ended: the innermost one running, -1 where none. The ops
    that ended are skipped by binary lifting over a table of running maxima of their ends,
    not one at a time."""
    pos = np.searchsorted(o_ts, at, side="right") - 1
    if not o_ts.size:
        return pos
    reach = [o_end]  # reach[k][i]: the latest end among ops i - 2^k + 1 .. i
    while (1 << len(reach)) <= o_ts.size:
        prev, step = reach[-1], 1 << (len(reach) - 1)
        reach.append(np.maximum(prev, np.concatenate([np.full(step, -1), prev[:-step]])))
    for k in range(len(reach) - 1, -1, -1):
        ended = (pos >= 0) & (reach[k][np.maximum(pos, 0)] <= at)
        pos = np.where(ended, pos - (1 << k), pos)
    return np.where(pos >= 0, pos, -1)


def idle_by_cause(frame: pd.DataFrame) -> dict[str, float]:
    """Each cause's idle ns summed over ``frame``'s rows (signals' columns of ``NUMERIC``)."""
    return {c: float(frame[f"idle_{c}_ns"].sum()) for c in CAUSES}


def innermost_ops(texts, cause: str | None = None) -> dict[str, int]:
    """The ``idle_host_ops`` texts of some ranks and steps, added up: op name -> idle ns (of
    one ``cause`` alone, when given).

    >>> innermost_ops(["alloc|cudaFree=5;ops|aten::add=2", "alloc|cudaFree=1", ""])
    {'cudaFree': 6, 'aten::add': 2}
    >>> innermost_ops(["alloc|cudaFree=5;ops|aten::add=2"], "ops")
    {'aten::add': 2}
    """
    out: dict[str, int] = {}
    for text in texts:
        for part in str(text).split(";") if text else ():
            said, _, ns = part.rpartition("=")
            kind, _, name = said.partition("|")
            if cause is None or kind == cause:
                out[name] = out.get(name, 0) + int(ns)
    return out
