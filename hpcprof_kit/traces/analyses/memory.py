"""Memory from a trace: the allocations and frees that ``profile_memory=True`` records.

With ``torch.profiler.profile(..., profile_memory=True)`` every allocation and free made
while the profiler is active becomes a ``[memory]`` instant event in the exported trace:
its size (``Bytes``, negative for a free), the allocator's running totals after it
(``Total Allocated``, ``Total Reserved``) and the device it is on. Four views of them:

- :func:`memory_timeline` - one row per event: the allocated bytes over time;
- :func:`memory_by_op` - each event given to the op that made it (torch's "self CPU memory");
- :func:`memory_peaks` - the peak allocated bytes of each step, per rank and device;
- :func:`plot_memory` - allocated bytes over time per rank, the steps marked.

>>> import json, tempfile, pathlib
>>> from hpcprof_kit import traces
>>> ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
...        "ts": 0, "dur": 100},
...       {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1,
...        "ts": 10, "dur": 5}]
>>> ev += [{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
...         "args": {"Bytes": b, "Total Allocated": a, "Device Type": 0, "Device Id": -1}}
...        for ts, b, a in [(12, 512, 512), (50, -512, 0)]]
>>> p = pathlib.Path(tempfile.mkdtemp()) / "train-0-of-1.json"
>>> _ = p.write_text(json.dumps({"traceEvents": ev}))
>>> df = traces.load(p, cache=False)
>>> traces.memory_timeline(df)[["ts_ns", "bytes", "allocated_bytes", "device", "step"]]
   ts_ns  bytes  allocated_bytes  device  step
0  12000    512              512      -1     1
1  50000   -512                0      -1     1
>>> traces.memory_by_op(df)[["op", "alloc_bytes", "freed_bytes", "self_bytes", "count"]]
              op  alloc_bytes  freed_bytes  self_bytes  count
0    aten::empty          512            0         512      1
1  ProfilerStep*            0          512        -512      1

The trace table keeps the ``[memory]`` rows but not their args: the loader keeps those beside
it as it reads each file (:mod:`hpcprof_kit.traces.read.memory_events`). A table that lost them (its
attrs went through JSON, as in a parquet file) has them read back from the trace files it was
loaded from, which must then still be where ``traces.load`` found them.

GPU memory of a whole run: torch 2.10+ deprecates ``prof.export_memory_timeline(...)`` in
favour of memory snapshots. Call ``torch.cuda.memory._record_memory_history(max_entries=100000)``
before the loop and ``torch.cuda.memory._dump_snapshot("snapshot.pickle")`` after it (on Intel
GPUs ``torch.xpu.memory._record_memory_history`` / ``torch.xpu.memory._dump_snapshot``), then
drop the file on https://pytorch.org/memory_viz: every block with the stack that allocated it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.errors import KitWarning
from hpcprof_kit.traces.analyses.breakdown import (
    WRAPPER_CATS,
    bare,
    require_table,
    text_test,
)
from hpcprof_kit.traces.read.memory_events import MEMORY_EVENT, match_rows, read_events

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

TIMELINE_COLUMNS = {
    "rank": "int32",
    "ts_ns": "int64",
    "bytes": "int64",  # signed: negative for a free
    "allocated_bytes": "Int64",  # "Total Allocated" after the event; <NA> where not written
    "reserved_bytes": "Int64",  # "Total Reserved" after the event; <NA> where not written
    "device": "int32",  # -1: host memory, else the device index
    "step": "int32",  # ProfilerStep number the event falls in, or -1
    "device_type": "str",  # "cpu", "cuda", "xpu", ...
    "pid": "str",
    "tid": "str",
    "addr": "Int64",  # the block's address: an allocation and its free share it
}
BY_OP_COLUMNS = ("op", "device", "alloc_bytes", "freed_bytes", "self_bytes", "count")
PEAK_COLUMNS = ("rank", "device", "step", "start_bytes", "peak_bytes", "end_bytes")
PEAK_COLUMNS += ("growth_bytes", "peak_ts_ns", "events")
OUTSIDE = "(outside any op)"  # torch's key_averages lists these events as "[memory]"
# spans torch's own tables skip (torch.autograd.profiler_util._filter_name)
TORCH_SKIPS = ("profiler::_record_function_enter", "profiler::_record_function_enter_new")
TORCH_SKIPS += ("profiler::_record_function_exit", "aten::is_leaf", "aten::output_nr")
TORCH_SKIPS += ("aten::_version",)
_STEP = re.compile(r"^ProfilerStep#\d+$")
NO_MEMORY = (
    "the trace table has no [memory] events, so there is no memory to {what}; record them with "
    "torch.profiler.profile(..., profile_memory=True) and load the new traces"
)


def _empty(columns: dict[str, str]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in columns.items()})


def _nullable(values: np.ndarray, present: np.ndarray) -> pd.arrays.IntegerArray:
    import pandas as pd

    return pd.arrays.IntegerArray(np.asarray(values, np.int64), ~np.asarray(present, bool))


def memory_timeline(df: pd.DataFrame) -> pd.DataFrame:
    """One row per ``[memory]`` event of a trace table, sorted by rank, device and time.

    Columns (see ``TIMELINE_COLUMNS``): ``rank, ts_ns, bytes`` (signed: negative for a free),
    ``allocated_bytes`` and ``reserved_bytes`` (the allocator's totals after the event, <NA>
    where the trace lacks them), ``device`` (-1: host memory), ``step`` (-1: outside every
    ProfilerStep), then ``device_type, pid, tid, addr``. A trace recorded without
    ``profile_memory=True`` gives a table with these columns and no rows. Within one rank
    and device, ``allocated_bytes[i] - allocated_bytes[0] == cumsum(bytes)[i] - bytes[0]``.

    >>> from hpcprof_kit import traces
    >>> traces.memory_timeline(traces.empty_table()).columns.tolist()[:7]
    ['rank', 'ts_ns', 'bytes', 'allocated_bytes', 'reserved_bytes', 'device', 'step']
    """
    import pandas as pd

    require_table(df, ("rank", "track", "name", "pid", "tid", "ts_ns", "step", "cycle"))
    d = bare(df)  # a column of the table itself would copy its attrs (every rank's) each time
    is_memory = text_test(d["name"], lambda s: s == MEMORY_EVENT)
    is_memory &= text_test(d["track"], lambda s: s == "instant")
    if not is_memory.any():
        return _empty(TIMELINE_COLUMNS)
    picked = d[is_memory]
    rows = pd.DataFrame(
        {
            "rank": picked["rank"].to_numpy(np.int32),
            "cycle": picked["cycle"].to_numpy(np.int16),
            "pid": picked["pid"].astype(str).to_numpy(),
            "tid": picked["tid"].astype(str).to_numpy(),
            "ts_ns": picked["ts_ns"].to_numpy(np.int64),
            "step": picked["step"].to_numpy(np.int32),
        }
    )
    events = read_events(df.attrs.get("ranks", {}), sorted(set(rows["rank"].tolist())))
    got = match_rows(rows, events)
    by = ("order", "cycle", "ts_ns", "device", "rank")  # np.lexsort: the last key first; stable
    got = got.take(np.lexsort(tuple(got[c].to_numpy() for c in by)))
    out = pd.DataFrame(
        {
            "rank": got["rank"].to_numpy(np.int32),
            "ts_ns": got["ts_ns"].to_numpy(np.int64),
            "bytes": got["bytes"].to_numpy(np.int64),
            "allocated_bytes": _nullable(got["allocated"].to_numpy(), got["has_allocated"]),
            "reserved_bytes": _nullable(got["reserved"].to_numpy(), got["has_reserved"]),
            "device": got["device"].to_numpy(np.int32),
            "step": got["step"].to_numpy(np.int32),
            "device_type": got["device_type"].to_numpy(object),
            "pid": got["pid"].to_numpy(object),
            "tid": got["tid"].to_numpy(object),
            "addr": _nullable(got["addr"].to_numpy(), got["has_addr"]),
        }
    )
    return out.astype(TIMELINE_COLUMNS)  # text as pandas keeps it: "str" (3.x) or object


def _innermost(sg, s0, s1, tie, pg, pt) -> np.ndarray:
    """For each point (thread ``pg``, time ``pt``), the index of the innermost span (thread
    ``sg``, ``[s0, s1]``, both ends included as torch includes them) that holds it, or -1.

    One sweep over starts, points and ends in time order: a span's level is the depth after it
    opens, a point's depth the spans open around it; the innermost span is the last one opened
    before the point at the point's depth (spans on one thread nest). ``tie`` orders spans of
    equal start and end (a name rank), so the answer never depends on the input's row order.
    """
    ns, n = len(sg), len(pg)
    zeros = np.zeros(n, dtype=np.int64)
    g = np.concatenate([sg, pg, sg])
    t = np.concatenate([s0, pt, s1])
    kind = np.concatenate([np.zeros(ns), np.ones(n), np.full(ns, 2)]).astype(np.int8)
    # at one time: starts, then points, then ends; the parent opens first and closes last
    longer = np.concatenate([-s1, zeros, -s0])
    names = np.concatenate([tie, zeros, -tie])
    order = np.lexsort((names, longer, kind, t, g))
    delta = np.concatenate([np.ones(ns), zeros, -np.ones(ns)]).astype(np.int64)
    depth = np.cumsum(delta[order])
    pos = np.empty(order.size, dtype=np.int64)
    pos[order] = np.arange(order.size)
    level, spos = depth[pos[:ns]], pos[:ns]
    pdepth, ppos = depth[pos[ns : ns + n]], pos[ns : ns + n]
    width, size = (int(level.max()) + 1 if ns else 1), max(order.size, 1)
    skey = (sg.astype(np.int64) * width + level) * size + spos
    sorter = np.argsort(skey, kind="stable")
    idx = np.searchsorted(skey[sorter], (pg.astype(np.int64) * width + pdepth) * size + ppos) - 1
    cand = sorter[np.maximum(idx, 0)] if ns else np.zeros(n, dtype=np.int64)
    ok = (pdepth > 0) & (idx >= 0)
    if ns:
        ok &= (sg[cand] == pg) & (level[cand] == pdepth)
    return np.where(ok, cand, -1)


def _op_of_events(df: pd.DataFrame, tl: pd.DataFrame) -> np.ndarray:
    """The name of the innermost host span holding each timeline event on its rank and
    thread (``ProfilerStep#N`` as ``ProfilerStep*``, as torch groups them), else OUTSIDE."""
    import pandas as pd

    d = bare(df)
    host = text_test(d["track"], lambda s: s.isin(["cpu", "comm"])) & (d["device"] < 0)
    host &= ~text_test(d["cat"], lambda s: s.isin(WRAPPER_CATS))
    host &= ~text_test(d["name"], lambda s: s.isin(TORCH_SKIPS)) & (d["dur_ns"] >= 0)
    spans = d[host]
    keys = pd.DataFrame(
        {
            "rank": np.concatenate([spans["rank"].to_numpy(np.int64), tl["rank"].to_numpy()]),
            "pid": np.concatenate([spans["pid"].astype(str).to_numpy(), tl["pid"].to_numpy()]),
            "tid": np.concatenate([spans["tid"].astype(str).to_numpy(), tl["tid"].to_numpy()]),
        }
    )
    group = keys.groupby(["rank", "pid", "tid"], sort=True).ngroup().to_numpy(np.int64)
    cats = spans["name"].cat.categories.astype(str)
    codes = spans["name"].cat.codes.to_numpy()
    labels = np.array([_STEP.sub("ProfilerStep*", c) for c in cats] + [""], dtype=object)
    alpha = np.argsort(np.argsort(np.asarray(cats, dtype=str), kind="stable"))
    tie = np.append(alpha, len(cats))[codes].astype(np.int64)
    start = spans["ts_ns"].to_numpy(np.int64)
    which = _innermost(
        group[: len(spans)],
        start,
        start + spans["dur_ns"].to_numpy(np.int64),
        tie,
        group[len(spans) :],
        tl["ts_ns"].to_numpy(np.int64),
    )
    named = labels[codes[np.maximum(which, 0)]] if len(spans) else np.full(len(tl), OUTSIDE)
    return np.where(which >= 0, named, OUTSIDE)


def memory_by_op(df: pd.DataFrame) -> pd.DataFrame:
    """The allocations and frees of a trace table given to the ops that made them.

    Each ``[memory]`` event goes to the innermost host span (an op, a ``record_function``
    range, a ``ProfilerStep``) on its rank, process and thread that holds its time: the
    attribution behind ``prof.key_averages()``'s "Self CPU Mem". One row per op name and
    device: ``alloc_bytes`` (allocated), ``freed_bytes`` (freed, as a positive number),
    ``self_bytes`` (their difference: torch's ``self_cpu_memory_usage`` for host memory),
    ``count`` (events). ``ProfilerStep#N`` rows are summed as ``ProfilerStep*``, as torch
    does; events outside every span are the row ``"(outside any op)"`` (torch's
    ``"[memory]"``). Ranks are summed: pass ``df[df["rank"] == 0]`` for one rank. Sorted by
    ``alloc_bytes`` (largest first), then op name and device.

    >>> from hpcprof_kit import traces
    >>> traces.memory_by_op(traces.empty_table()).columns.tolist()
    ['op', 'device', 'alloc_bytes', 'freed_bytes', 'self_bytes', 'count']
    """
    import pandas as pd

    tl = memory_timeline(df)
    if tl.empty:
        return _empty({c: "str" if c == "op" else "int64" for c in BY_OP_COLUMNS})
    nbytes = tl["bytes"].to_numpy(np.int64)
    table = pd.DataFrame(
        {
            "op": _op_of_events(df, tl),
            "device": tl["device"].to_numpy(np.int64),
            "alloc_bytes": np.where(nbytes > 0, nbytes, 0),
            "freed_bytes": np.where(nbytes < 0, -nbytes, 0),
            "count": np.ones(len(tl), dtype=np.int64),
        }
    )
    out = table.groupby(["op", "device"], sort=True).sum().reset_index()
    out["self_bytes"] = out["alloc_bytes"] - out["freed_bytes"]
    out = out.sort_values(["alloc_bytes", "op", "device"], ascending=[False, True, True])
    return out[list(BY_OP_COLUMNS)].reset_index(drop=True)


def _allocated(tl: pd.DataFrame) -> np.ndarray:
    """Allocated bytes after each event of a sorted timeline: ``Total Allocated`` where the
    trace wrote it, else the running sum of ``bytes`` from the trace's start (with a warning:
    memory allocated before the profiler started is then missing)."""
    import warnings

    out = tl["allocated_bytes"].to_numpy(dtype=float, na_value=np.nan)
    missing = np.isnan(out)
    if missing.any():
        running = tl.groupby(["rank", "device"], sort=False)["bytes"].cumsum().to_numpy()
        out = np.where(missing, running, out)
        warnings.warn(
            f"{int(missing.sum())} [memory] events carry no 'Total Allocated'; their allocated "
            "bytes are the running sum of 'Bytes' from the start of the trace",
            KitWarning,
            stacklevel=3,
        )
    return out.astype(np.int64)


def memory_peaks(df: pd.DataFrame) -> pd.DataFrame:
    """The peak allocated bytes of each step, per rank and device.

    Columns: ``rank, device, step`` (-1: events outside every ProfilerStep), ``start_bytes``
    (allocated when the step's first event came), ``peak_bytes`` (the most allocated at any
    moment of the step), ``end_bytes`` (after its last event), ``growth_bytes`` (peak minus
    start: what the step itself added: activations, gradients, temporaries), ``peak_ts_ns``
    and ``events``. Sorted by rank, device and step.

    >>> from hpcprof_kit import traces
    >>> traces.memory_peaks(traces.empty_table()).columns.tolist()[:6]
    ['rank', 'device', 'step', 'start_bytes', 'peak_bytes', 'end_bytes']
    """
    import pandas as pd

    tl = memory_timeline(df)
    if tl.empty:
        return _empty({c: "int64" for c in PEAK_COLUMNS})
    after = _allocated(tl)
    before = after - tl["bytes"].to_numpy(np.int64)
    t = pd.DataFrame(
        {
            "rank": tl["rank"].to_numpy(np.int64),
            "device": tl["device"].to_numpy(np.int64),
            "step": tl["step"].to_numpy(np.int64),
            "ts_ns": tl["ts_ns"].to_numpy(np.int64),
            "before": before,
            "after": after,
            "level": np.maximum(before, after),  # the most held around the event
        }
    )
    g = t.groupby(["rank", "device", "step"], sort=True)
    out = g.agg(
        start_bytes=("before", "first"),
        peak_bytes=("level", "max"),
        end_bytes=("after", "last"),
        events=("ts_ns", "size"),
    )
    first_peak = t.loc[g["level"].idxmax().to_numpy(), ["rank", "device", "step", "ts_ns"]]
    out["peak_ts_ns"] = first_peak.set_index(["rank", "device", "step"])["ts_ns"]
    out["growth_bytes"] = out["peak_bytes"] - out["start_bytes"]
    return out.reset_index()[list(PEAK_COLUMNS)].astype("int64")
