"""Why the device sat idle, and how long kernel launches took: HTA's two analyses, for CUDA,
HIP and XPU traces.

HolisticTraceAnalysis (HTA) 0.5.0 splits each stream's idle time by its cause
(``get_idle_time_breakdown``) and pairs every kernel with the host call that launched it
(``get_cuda_kernel_launch_stats``). This module computes both from the kit's trace table
under HTA's definitions, so the two tools can be checked against each other
(``tests/test_hta_idle_launch.py``, ``docs/hta-crosscheck.md``), and extends them to the
launch calls HTA does not pair: HIP's and Intel XPU's (Unified Runtime ``urEnqueue*``).

Both analyses see what HTA sees (:mod:`hpcprof_kit.traces.analyses.hta_compat`): per rank, the device
events of HTA's window (when the ranks name two or more ``ProfilerStep`` events, the last
step and what it launched are left out) and, with ``microseconds=True``, HTA's rounding of
sub-µs timestamps. Without it every figure is exact in ns.

**Idle split** (:func:`idle_split`). Per stream, kernels, copies and sets in start order;
the gap before each event (its start minus the previous event's end on that stream) is:

- ``host_wait``: the call that launched the event started after the previous event ended:
  the device waited for the host to ask for more work;
- ``kernel_wait``: otherwise, when the gap is shorter than :data:`KERNEL_WAIT_NS` (HTA's
  ``consecutive_kernel_delay=30``; HTA's docstring calls it 30 ns, but HTA compares it to
  gaps in µs, so it is 30 µs): the overhead between back-to-back launches;
- ``other``: the rest (for instance a kernel waiting on an event of another stream).

**Launch stats** (:func:`launch_stats`, :func:`launch_summary`). A launch is a runtime call
of :data:`LAUNCH_NAMES` and a device event with its correlation id on the same rank:
``cpu_duration`` is the call's duration, ``gpu_duration`` the device event's,
``launch_delay`` the device event's start minus the call's *end*, negative values clipped
to 0 (HTA's definition). HTA flags calls longer than :data:`RUNTIME_CUTOFF_NS` and delays
longer than :data:`LAUNCH_DELAY_CUTOFF_NS`.

Where the kit goes beyond HTA (``docs/hta-crosscheck.md`` has the figures side by side):
it pairs the HIP and XPU launch calls too (column ``hta`` says which launches HTA pairs);
it adds ``start_delay_ns`` (device start minus the call's *start*); it groups idle time by
(device, stream) where HTA groups by stream alone, and adds a per-rank total row; it sorts
a stream's events stably where HTA's sort is not. ``microseconds=True`` rounds the
absolute time, so on a trace whose ``ts`` count from ``baseTimeNanoseconds`` (torch 2.4+)
an event can round 1 µs away from HTA's, which rounds the file's relative µs.

Nothing to analyse is an error: a table without device events, or (for launches) without a
launch paired to its device event, raises :class:`~hpcprof_kit.errors.TraceFormatError`
naming what is missing and how to record it. A rank that lacks them in a table where other
ranks have them is left out and named in ``attrs["skipped"]`` of the result.

>>> df = _demo_table()
>>> idle_split(df)[["rank", "stream", "idle_ns", "host_wait_ns", "kernel_wait_ns"]]
   rank  stream  idle_ns  host_wait_ns  kernel_wait_ns
0     0      -1    45000         40000            5000
1     0       7    45000         40000            5000
>>> launch_stats(df)["launch_delay_ns"].tolist()
[5000, 14000, 5000]
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces.analyses.breakdown import text_test
from hpcprof_kit.traces.analyses.hta_compat import HTA_VERSION, _device_rows, _per_label, _times
from hpcprof_kit.traces.table.distinct import distinct

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# HTA's defaults, in ns (HTA's own units are µs)
KERNEL_WAIT_NS = 30_000  # get_idle_time_breakdown(consecutive_kernel_delay=30)
RUNTIME_CUTOFF_NS = 50_000  # get_cuda_kernel_launch_stats(runtime_cutoff=50)
LAUNCH_DELAY_CUTOFF_NS = 100_000  # get_cuda_kernel_launch_stats(launch_delay_cutoff=100)

# The launch calls HTA 0.5.0's get_cuda_kernel_launch_stats pairs (include_memory_events=True)
HTA_LAUNCH_NAMES = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "runFunction - job_prep_and_submit_for_execution",  # MTIA
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
    }
)
# launch call -> what it puts on the device: HTA's, the further CUDA driver and HIP calls of
# HTA's own symbol table (TraceSymbolTable.get_runtime_launch_events_query), and Intel's
# Unified Runtime enqueues (XPU traces, PyTorch 2.5+)
LAUNCH_NAMES: dict[str, str] = {
    "cudaLaunchKernel": "kernel",
    "cudaLaunchKernelExC": "kernel",
    "cuLaunchKernel": "kernel",
    "cuLaunchKernelEx": "kernel",
    "runFunction - job_prep_and_submit_for_execution": "kernel",
    "hipLaunchKernel": "kernel",
    "hipExtLaunchKernel": "kernel",
    "hipModuleLaunchKernel": "kernel",
    "hipExtModuleLaunchKernel": "kernel",
    "urEnqueueKernelLaunch": "kernel",
    "cudaMemcpyAsync": "memory",
    "cudaMemsetAsync": "memory",
    "hipMemcpyAsync": "memory",
    "hipMemsetAsync": "memory",
    "hipMemcpyWithStream": "memory",
    "urEnqueueUSMMemcpy": "memory",
    "urEnqueueUSMMemcpy2D": "memory",
    "urEnqueueUSMFill": "memory",
    "urEnqueueUSMFill2D": "memory",
}
DEVICE_TRACKS = ("gpu", "comm", "memcpy", "memset")  # comm: on the device only
WAITS = ("host_wait", "kernel_wait", "other")
IDLE_COLUMNS = [
    "rank",
    "device",
    "stream",
    "events",
    "idle_ns",
    *(f"{w}_ns" for w in WAITS),
    *(f"{w}_share" for w in WAITS),
]
LAUNCH_COLUMNS = [
    "rank",
    "corr",
    "launch",
    "kernel",
    "kind",
    "device",
    "stream",
    "launch_ts_ns",
    "cpu_duration_ns",
    "gpu_duration_ns",
    "launch_delay_ns",
    "start_delay_ns",
    "hta",
    "queue_ns",
]
SUMMARY_COLUMNS = [
    "rank",
    "launches",
    "cpu_duration_p50_ns",
    "cpu_duration_p90_ns",
    "gpu_duration_p50_ns",
    "gpu_duration_p90_ns",
    "launch_delay_p50_ns",
    "launch_delay_p90_ns",
    "runtime_outliers",
    "delay_outliers",
    "short_kernels",
]
_NEEDED = ("rank", "track", "cat", "name", "ts_ns", "dur_ns", "corr", "stream", "device")
_NO_STREAM = np.iinfo(np.int64).max  # stands in for a device event's unknown stream
_NONE = np.iinfo(np.int64).min  # no earlier event on the stream
RECORD_DEVICE = (
    "record the run with the device's activity (torch.profiler's ProfilerActivity.CUDA or "
    "ProfilerActivity.XPU)"
)
RECORD_STEPS = (
    "they all belong to the last ProfilerStep, which HTA's window leaves out; record two "
    "or more steps (a schedule with active >= 2)"
)


def _check(df: pd.DataFrame) -> None:
    missing = [c for c in _NEEDED if c not in getattr(df, "columns", ())]
    if missing:
        raise TraceFormatError(
            f"expected a trace table, but columns {missing} are missing; build it with "
            "hpcprof_kit.traces.load(path)"
        )


_LAST: list = []  # (weakref to the table, its length, microseconds, the arrays): one entry


def _prepared(df: pd.DataFrame, microseconds: bool):
    """Per row: start, end (ns, HTA-rounded when asked), rank, corr, and two masks: device
    events in HTA's window, and the runtime calls that carry a correlation id. The arrays of
    the last table asked for are kept, so idle_split and launch_stats of one table (as the
    run report calls them) prepare it once."""
    if _LAST and _LAST[0][0]() is df and _LAST[0][1:3] == (len(df), microseconds):
        return _LAST[0][3]
    out = _prepare(df, microseconds)
    _LAST[:] = [(weakref.ref(df), len(df), microseconds, out)]
    return out


def _prepare(df: pd.DataFrame, microseconds: bool):
    import pandas as pd

    _check(df)
    track = df["track"]
    stream = df["stream"].to_numpy().astype(np.int64)
    corr = df["corr"].to_numpy().astype(np.int64)
    on_device = text_test(track, lambda t: t.isin(DEVICE_TRACKS)) & (
        ~text_test(track, lambda t: t == "comm") | (df["device"].to_numpy() >= 0) | (stream >= 0)
    )
    # a device event whose stream the loader could not keep (an XPU queue id above int64)
    # still belongs to HTA's window rule, which tells device from host by the stream
    lost = on_device & (stream == -1) & (corr >= 0)
    view = df[["rank", "name", "cat", "track", "corr"]].copy()
    view["stream"] = np.where(lost, _NO_STREAM, stream)
    view["ts_ns"], view["dur_ns"] = df["ts_ns"].to_numpy(), df["dur_ns"].to_numpy()
    start, end = _times(view, microseconds)
    window = _device_rows(pd.DataFrame(view), start) & on_device
    runtime = text_test(track, lambda t: t == "runtime") & (corr >= 0)
    rank = df["rank"].to_numpy().astype(np.int64)
    return start, end, rank, corr, stream, window, runtime, on_device


def _fix(outside_window: bool) -> str:
    """What to do about a table with no device event to analyse."""
    return RECORD_STEPS if outside_window else RECORD_DEVICE


def _skipped(all_ranks: np.ndarray, kept: np.ndarray, why: str) -> dict[int, str]:
    missing = np.setdiff1d(distinct(all_ranks), distinct(kept), assume_unique=True)
    return {int(r): why for r in missing}


def _launch_lookup(rank, corr, runtime, start):
    """Start of the runtime call with each row's (rank, corr), or NaN: the last such call in
    table order when there are several (HTA keeps the last one it assigns)."""
    key = (rank << 40) | (corr & ((1 << 40) - 1))
    rows = np.flatnonzero(runtime)
    order = rows[np.argsort(key[rows], kind="stable")]
    keys = key[order]

    def lookup(which: np.ndarray) -> np.ndarray:
        out = np.full(which.size, np.nan)
        if keys.size == 0:
            return out
        pos = np.searchsorted(keys, key[which], side="right") - 1
        hit = (pos >= 0) & (keys[np.maximum(pos, 0)] == key[which]) & (corr[which] >= 0)
        out[hit] = start[order[pos[hit]]]
        return out

    return lookup


def idle_split(
    df: pd.DataFrame, *, microseconds: bool = False, kernel_wait_ns: int = KERNEL_WAIT_NS
) -> pd.DataFrame:
    """Per rank and device stream, the stream's idle time split as HTA's
    ``get_idle_time_breakdown`` splits it: host wait, kernel wait and other (see the module
    docstring for the rules).

    Columns: ``rank``, ``device``, ``stream``, ``events`` (kernels, copies and sets on the
    stream), ``idle_ns`` (the sum of the gaps between consecutive events), ``host_wait_ns``,
    ``kernel_wait_ns``, ``other_ns`` (int64 ns; they add up to ``idle_ns``) and each one's
    ``*_share`` of ``idle_ns`` (NaN when the stream was never idle, as in HTA). Each rank
    also has a total row with ``stream == -1`` and ``device == -1``: the sums over its
    streams (idle time of each stream, so a moment when two streams wait counts twice; the
    device-wide idle time is ``hta_compat.temporal_breakdown``'s). Rows are sorted by rank,
    then stream, the total first.

    Differences from HTA, none of which moves a figure on a one-device rank: HTA groups by
    stream alone where the kit groups by (device, stream); HTA rounds its µs to 2 decimals;
    HTA leaves a category out of a stream where it never happened, the kit writes 0. Device
    events whose stream the loader could not read (``stream == -1``) have no stream to
    wait on and are left out.

    >>> out = idle_split(_demo_table())
    >>> out.loc[out["stream"] == 7, ["events", "other_ns", "host_wait_share"]]
       events  other_ns  host_wait_share
    1       3         0         0.888889
    """
    import pandas as pd

    start, end, rank, corr, stream, window, runtime, on_device = _prepared(df, microseconds)
    device = df["device"].to_numpy().astype(np.int64)
    rows = np.flatnonzero(window & (stream >= 0))
    if rows.size == 0:
        raise TraceFormatError(
            "the trace table has no device events (kernels, copies or sets on a device "
            f"stream) in HTA {HTA_VERSION}'s window, so the device's idle time is unknown; "
            + _fix(bool((on_device & (stream >= 0)).any()))
        )
    order = rows[np.lexsort((start[rows], stream[rows], device[rows], rank[rows]))]
    r, d, s = rank[order], device[order], stream[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = (r[1:] != r[:-1]) | (d[1:] != d[:-1]) | (s[1:] != s[:-1])
    prev_end = np.empty(order.size, dtype=np.int64)
    prev_end[1:] = end[order][:-1]
    gap = np.where(first, 0, start[order] - prev_end)
    launched = _launch_lookup(rank, corr, runtime, start)(order)
    with np.errstate(invalid="ignore"):
        host = ~first & (launched > prev_end)  # NaN: no launch call found, never host wait
    kernel = ~first & ~host & (gap < kernel_wait_ns)
    other = ~first & ~host & ~kernel
    heads_at = np.flatnonzero(first)  # the rows are sorted by stream: sum each run exactly
    sums = {
        "events": np.diff(np.append(heads_at, order.size)),
        "idle_ns": np.add.reduceat(gap, heads_at),
    }
    for name, mask in zip(WAITS, (host, kernel, other), strict=True):
        sums[f"{name}_ns"] = np.add.reduceat(np.where(mask, gap, 0), heads_at)
    heads = order[first]
    out = pd.DataFrame({"rank": rank[heads], "device": device[heads], "stream": stream[heads]})
    out = out.assign(**sums)
    totals = out.groupby("rank", as_index=False)[list(sums)].sum()
    totals["device"], totals["stream"] = -1, -1
    out = pd.concat([totals, out], ignore_index=True)
    out = out.sort_values(["rank", "stream", "device"], kind="stable", ignore_index=True)
    idle = out["idle_ns"].to_numpy()
    for name in WAITS:
        with np.errstate(divide="ignore", invalid="ignore"):
            out[f"{name}_share"] = np.where(idle != 0, out[f"{name}_ns"] / idle, np.nan)
    out = out[IDLE_COLUMNS].astype({c: "int64" for c in IDLE_COLUMNS[:8]})
    out.attrs["skipped"] = _skipped(rank, rank[rows], "no device events in HTA's window")
    return out


def launch_stats(df: pd.DataFrame, *, microseconds: bool = False) -> pd.DataFrame:
    """One row per launch: a runtime call of :data:`LAUNCH_NAMES` and the device event with
    its correlation id on the same rank, in HTA's window (what HTA's
    ``get_cuda_kernel_launch_stats`` computes, for HIP and XPU calls too).

    Columns: ``rank``, ``corr``, ``launch`` (the call's name), ``kernel`` (the device event's
    name), ``kind`` (``kernel`` or ``memory``, by the call), ``device``, ``stream``,
    ``launch_ts_ns`` (the call's start), ``cpu_duration_ns`` (the call's duration),
    ``gpu_duration_ns`` (the device event's), ``launch_delay_ns`` (HTA's: device start minus
    the call's end, clipped at 0), ``start_delay_ns`` (device start minus the call's start,
    not clipped), ``hta`` (True when HTA 0.5.0 pairs this call too; it knows the CUDA and
    MTIA names of :data:`HTA_LAUNCH_NAMES` only) and ``queue_ns``: the part of the launch
    delay the event waited behind earlier work on its device, which was still running when
    the call ended (the host running ahead of the device, not a slow launch; any stream, as
    a kernel also waits for the streams it depends on); ``launch_delay_ns - queue_ns`` is
    the launch's own. Times are int64 ns; rows are sorted by
    rank and call start. ``stream`` is -1 for a device event whose stream the loader could
    not read (XPU copies on a queue id above int64).

    >>> launch_stats(_demo_table())[["launch", "kernel", "cpu_duration_ns", "start_delay_ns"]]
                 launch       kernel  cpu_duration_ns  start_delay_ns
    0  cudaLaunchKernel         gemm             5000           10000
    1   cudaMemcpyAsync  Memcpy HtoD             1000           15000
    2  cudaLaunchKernel         relu             5000           10000
    """
    import pandas as pd

    start, end, rank, corr, stream, window, runtime, on_device = _prepared(df, microseconds)
    is_launch = _per_label(df["name"], lambda s: s in LAUNCH_NAMES)[0]
    calls = np.flatnonzero(runtime & is_launch)
    events = np.flatnonzero(window & (corr >= 0))
    if events.size == 0:
        raise TraceFormatError(
            "the trace table has no device events with a correlation id in HTA "
            f"{HTA_VERSION}'s window, so there is no launch to pair; "
            + _fix(bool((on_device & (corr >= 0)).any()))
        )
    if calls.size == 0:
        raise TraceFormatError(
            "the trace table has device events but no runtime launch call (one of "
            f"{sorted(LAUNCH_NAMES)} on the runtime track); record the run with the device's "
            "activity so the profiler keeps its runtime calls, or load the trace with "
            "hpcprof_kit.traces.load, which keeps them on the 'runtime' track"
        )
    names = _names(df["name"], np.concatenate([calls, events]))
    prev_end = _previous_end(rank, df["device"].to_numpy().astype(np.int64), stream, start, end)
    call, event = _pairs(rank, corr, calls, events)
    if not call.size:
        raise TraceFormatError(
            f"none of the {calls.size} launch calls has a device event with its correlation "
            f"id in HTA {HTA_VERSION}'s window; record the run with the device's activity "
            "and correlation ids (a trace whose kernels lack args.correlation cannot be paired)"
        )
    # in the table's order (rank, call start, correlation), each array put in it once
    by = np.lexsort((corr[call], start[call], rank[call]))
    call, event = call[by], event[by]
    launch = names[call]
    cpu = end[call] - start[call]
    start_delay = start[event] - start[call]
    # the part of the wait spent behind earlier work on the stream: the queue, not the launch
    prev = prev_end[event]
    behind = np.minimum(start[event], prev) - (start[call] + cpu)
    out = pd.DataFrame(
        {
            "rank": rank[call].astype(np.int64),
            "corr": corr[call].astype(np.int64),
            "launch": launch,
            "kernel": names[event],
            "kind": pd.Series(launch).map(LAUNCH_NAMES).to_numpy(),
            "device": df["device"].to_numpy()[event].astype(np.int64),
            "stream": stream[event],
            "launch_ts_ns": start[call],
            "cpu_duration_ns": cpu,
            "gpu_duration_ns": end[event] - start[event],
            "launch_delay_ns": np.maximum(start_delay - cpu, 0),
            "start_delay_ns": start_delay,
            "hta": pd.Series(launch).isin(HTA_LAUNCH_NAMES).to_numpy(),
            "queue_ns": np.where(prev == _NONE, 0, np.maximum(behind, 0)).astype(np.int64),
        }
    )[LAUNCH_COLUMNS]
    out.attrs["skipped"] = _skipped(rank, out["rank"].to_numpy(), "no paired launch")
    return out


def _pairs(rank, corr, calls: np.ndarray, events: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each (call, device event) of the same rank and correlation id, as row positions: a
    call with several events (a graph launch) once with each, calls in their order and each
    one's events in theirs (an inner join of the two by rank and correlation)."""
    key = (rank << 40) | (corr & ((1 << 40) - 1))
    by_key = events[np.argsort(key[events], kind="stable")]
    keys = key[by_key]
    lo = np.searchsorted(keys, key[calls], side="left")
    n = np.searchsorted(keys, key[calls], side="right") - lo
    call = np.repeat(calls, n)
    first = np.repeat(lo, n)
    nth = np.arange(call.size) - np.repeat(np.cumsum(n) - n, n)
    return call, by_key[first + nth]


def _names(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """The names of ``rows`` as text (an object array over the whole table, filled there
    only): a category column is looked up per code, not turned into text for every row."""
    out = np.empty(len(column), dtype=object)
    if column.dtype == "category":
        labels = np.asarray(column.cat.categories.astype(str), dtype=object)
        codes = column.cat.codes.to_numpy()[rows]
        out[rows] = np.where(codes >= 0, labels[codes] if labels.size else "nan", "nan")
    else:
        out[rows] = column.astype(str).to_numpy()[rows]
    return out


def _previous_end(rank, device, stream, start, end) -> np.ndarray:
    """Per row: the latest end among the device events that started before it on its
    (rank, device), any stream, int64 ns; :data:`_NONE` for the first, and for rows not on
    a stream. Any stream: a kernel also waits for the streams it depends on (an NCCL kernel
    waits for the compute stream's gradients)."""
    out = np.full(start.size, _NONE, dtype=np.int64)
    rows = np.flatnonzero(stream >= 0)
    if rows.size == 0:
        return out
    order = rows[np.lexsort((start[rows], device[rows], rank[rows]))]
    r, d = rank[order], device[order]
    head = np.ones(order.size, dtype=bool)
    head[1:] = (r[1:] != r[:-1]) | (d[1:] != d[:-1])
    group = np.cumsum(head).astype(np.int64)
    # a running maximum that restarts at each device: each one lifted above the last one
    ends = end[order].astype(np.int64)
    low = int(ends.min())
    span = int(ends.max()) - low + 1
    lifted = np.maximum.accumulate(ends - low + group * span) - group * span + low
    prev = np.empty(order.size, dtype=np.int64)
    prev[1:] = lifted[:-1]
    prev[head] = _NONE
    out[order] = prev
    return out


def launch_summary(
    df_or_stats: pd.DataFrame,
    *,
    runtime_cutoff_ns: int = RUNTIME_CUTOFF_NS,
    launch_delay_cutoff_ns: int = LAUNCH_DELAY_CUTOFF_NS,
) -> pd.DataFrame:
    """Per rank, the launches of :func:`launch_stats` in a few numbers; takes the trace table
    or what :func:`launch_stats` returned.

    Columns: ``rank``, ``launches``, the median (``p50``) and 90th percentile (``p90``) of
    ``cpu_duration``, ``gpu_duration`` and ``launch_delay`` (float64 ns, linear
    interpolation), and the counts of what HTA's plots single out: ``runtime_outliers``
    (calls longer than ``runtime_cutoff_ns``), ``delay_outliers`` (launch delay longer than
    ``launch_delay_cutoff_ns``) and ``short_kernels`` (device events shorter than their call,
    for calls within the runtime cutoff: the launch costs more than the work).

    >>> launch_summary(_demo_table())[["rank", "launches", "launch_delay_p50_ns", "short_kernels"]]
       rank  launches  launch_delay_p50_ns  short_kernels
    0     0         3               5000.0              0
    """
    stats = df_or_stats if "launch_delay_ns" in df_or_stats else launch_stats(df_or_stats)
    stats = stats.copy(deep=False)
    stats.attrs = {}
    cpu, gpu = stats["cpu_duration_ns"], stats["gpu_duration_ns"]
    stats["runtime_outliers"] = cpu > runtime_cutoff_ns
    stats["delay_outliers"] = stats["launch_delay_ns"] > launch_delay_cutoff_ns
    stats["short_kernels"] = (cpu <= runtime_cutoff_ns) & (gpu < cpu)
    by = stats.groupby("rank", sort=True)
    out = by.size().rename("launches").to_frame()
    for col in ("cpu_duration", "gpu_duration", "launch_delay"):
        for q in (50, 90):
            out[f"{col}_p{q}_ns"] = by[f"{col}_ns"].quantile(q / 100).astype(np.float64)
    for col in ("runtime_outliers", "delay_outliers", "short_kernels"):
        out[col] = by[col].sum().astype(np.int64)
    return out.reset_index()[SUMMARY_COLUMNS]


def _demo_table() -> pd.DataFrame:
    """Three launches on one stream (times in ns): a gemm launched at 0 runs [10, 30) µs; a
    copy launched at 20 µs runs [35, 40) µs, 5 µs after the gemm (kernel wait); a relu
    launched at 70 µs runs [80, 90) µs, 40 µs after the copy (the host asked for it 30 µs
    after the copy ended: host wait)."""
    import pandas as pd

    rows = [  # track, cat, name, ts, dur, corr, device, stream
        ("cpu", "user_annotation", "ProfilerStep#1", 0, 100_000, -1, -1, -1),
        ("runtime", "cuda_runtime", "cudaLaunchKernel", 0, 5_000, 1, -1, -1),
        ("gpu", "kernel", "gemm", 10_000, 20_000, 1, 0, 7),
        ("runtime", "cuda_runtime", "cudaMemcpyAsync", 20_000, 1_000, 2, -1, -1),
        ("memcpy", "gpu_memcpy", "Memcpy HtoD", 35_000, 5_000, 2, 0, 7),
        ("runtime", "cuda_runtime", "cudaLaunchKernel", 70_000, 5_000, 3, -1, -1),
        ("gpu", "kernel", "relu", 80_000, 10_000, 3, 0, 7),
    ]
    cols = ["track", "cat", "name", "ts_ns", "dur_ns", "corr", "device", "stream"]
    return pd.DataFrame(rows, columns=cols).assign(rank=0)
