"""Which ops, kernels and your own ranges dominate: top tables with self time, same-name slices."""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.errors import KitWarning, SpecError
from hpcprof_kit.traces.breakdown import STEP_PREFIX, require_table

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# unitrace appends the launch geometry to kernel names: "gemm[SIMD32 {8; 1; 1} {64; 1; 1}]"
_GEOMETRY = re.compile(r"\[SIMD\d*[^\]]*\]$")
KERNEL_TRACKS = ("gpu", "comm")
# torch.profiler's category of record_function ranges on the host (and their device mirror).
RANGE_CAT = "user_annotation"
DEVICE_RANGE_CAT = "gpu_user_annotation"


def self_times(ts: np.ndarray, dur: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """Exclusive time of each event: its duration minus its direct children on the same thread.

    Events nest when one starts inside another on the same thread; a child that overruns its
    parent (a defect some traces have) is clipped to the parent's end.

    >>> self_times(np.array([0, 2, 3]), np.array([10, 5, 1]), np.array([0, 0, 0])).tolist()
    [5, 4, 1]
    """
    n = ts.size
    order = np.lexsort((-dur, ts, thread))  # by thread, then start, longest first
    t_ord, s_ord, e_ord = thread[order].tolist(), ts[order].tolist(), (ts + dur)[order].tolist()
    child = [0] * n
    stack: list[int] = []  # positions in `order`, innermost last
    current = None
    for k in range(n):
        if t_ord[k] != current:
            current, stack = t_ord[k], []
        start = s_ord[k]
        while stack and e_ord[stack[-1]] <= start:
            stack.pop()
        if stack:
            parent = stack[-1]
            child[parent] += min(e_ord[k], e_ord[parent]) - start
        stack.append(k)
    out = np.empty(n, dtype=np.int64)
    out[order] = dur[order] - np.asarray(child, dtype=np.int64)
    return out


def _thread_codes(sub: pd.DataFrame) -> np.ndarray:
    import pandas as pd

    keys = pd.MultiIndex.from_arrays([sub["rank"], sub["pid"].astype(str), sub["tid"].astype(str)])
    return pd.factorize(keys)[0]


def _top(sub: pd.DataFrame, names: pd.Series, n: int, what: str, nested: bool) -> pd.DataFrame:
    import pandas as pd

    if not isinstance(n, int) or n < 1:
        raise SpecError(f"n={n!r} is not a positive whole number of rows; pass e.g. n=20")
    ts = sub["ts_ns"].to_numpy(dtype=np.int64)
    dur = sub["dur_ns"].to_numpy(dtype=np.int64)
    self_ns = self_times(ts, dur, _thread_codes(sub)) if nested and len(sub) else dur
    frame = pd.DataFrame({what: names.to_numpy(), "dur_ns": dur, "self_ns": self_ns})
    g = frame.groupby(what, sort=False)
    table = pd.DataFrame(
        {
            "count": g.size(),
            "total_ms": g["dur_ns"].sum() / 1e6,
            "self_ms": g["self_ns"].sum() / 1e6,
            "mean_us": g["dur_ns"].mean() / 1e3,
            "max_us": g["dur_ns"].max() / 1e3,
        }
    )
    all_self = table["self_ms"].sum()
    table["share"] = table["self_ms"] / all_self if all_self else 0.0
    return table.sort_values("self_ms", ascending=False).head(n)


def top_ops(df: pd.DataFrame, n: int = 20) -> pd.DataFrame:
    """The host ops (``cpu_op``) that take the most self time, all ranks together.

    Columns: count, total_ms, self_ms (minus nested ops on the same thread), mean_us, max_us,
    share (of all ops' self time). Your own ``record_function`` ranges are in
    :func:`user_ranges`.

    >>> from hpcprof_kit import traces                       # doctest: +SKIP
    >>> traces.top_ops(traces.load("runs/x/traces"), n=10)   # doctest: +SKIP
    """
    require_table(df, ("rank", "track", "cat", "name", "ts_ns", "dur_ns", "device"))
    is_op = (df["cat"].astype(str) == "cpu_op").to_numpy() & (df["device"].to_numpy() < 0)
    sub = df[is_op & (df["dur_ns"].to_numpy() > 0)]
    return _top(sub, sub["name"].astype(str), n, "op", nested=True)


def is_user_range(df: pd.DataFrame) -> np.ndarray:
    """Rows that are ``record_function`` ranges on the host's cpu track: yours, and torch's
    own (``Optimizer.step#...``); not ProfilerStep spans, not collectives (comm track)."""
    cat = df["cat"].astype(str).to_numpy()
    on_cpu = df["track"].astype(str).to_numpy() == "cpu"
    step = df["name"].astype(str).str.startswith(STEP_PREFIX).to_numpy()
    return (cat == RANGE_CAT) & on_cpu & (df["device"].to_numpy() < 0) & ~step


def user_ranges(df: pd.DataFrame, n: int = 20) -> pd.DataFrame:
    """Your ``record_function`` / ``trace_func`` / ``capture`` ranges, all ranks together
    (with the ranges torch itself records, such as ``Optimizer.step#Adam.step``).

    Same columns as :func:`top_ops` (``self_ms``: minus the ranges nested inside, on the
    same thread), plus ``device_ms`` on device traces: the time the device spent inside the
    range (torch's ``gpu_user_annotation`` copy of it). A table without ranges warns and is
    empty.

    >>> from hpcprof_kit import traces                           # doctest: +SKIP
    >>> traces.user_ranges(traces.load("runs/x"))                # doctest: +SKIP
    """
    import warnings

    require_table(df, ("rank", "track", "cat", "name", "ts_ns", "dur_ns", "device"))
    sub = df[is_user_range(df) & (df["dur_ns"].to_numpy() > 0)]
    if sub.empty:
        warnings.warn(
            "no record_function ranges in this trace table; wrap code in "
            "record_function('name'), @trace_func or capture('name') (hpcprof_kit.profiling) "
            "and profile again",
            KitWarning,
            stacklevel=2,
        )
    table = _top(sub, sub["name"].astype(str), n, "range", nested=True)
    on_device = df[(df["cat"].astype(str) == DEVICE_RANGE_CAT).to_numpy()]
    if len(on_device):
        device_ns = on_device.groupby(on_device["name"].astype(str))["dur_ns"].sum()
        table["device_ms"] = device_ns.reindex(table.index).fillna(0).to_numpy() / 1e6
    return table


def kernel_name(name: str) -> str:
    """The kernel name without unitrace's launch geometry suffix.

    >>> kernel_name("gemm_kernel[SIMD32 {8; 1; 1} {64; 1; 1}]")
    'gemm_kernel'
    """
    return _GEOMETRY.sub("", name)


def top_kernels(df: pd.DataFrame, n: int = 20) -> pd.DataFrame:
    """The device kernels (compute and communication) that take the most time, all ranks.

    Same columns as ``top_ops``; kernels do not nest, so their self time is their total.

    >>> from hpcprof_kit import traces                          # doctest: +SKIP
    >>> traces.top_kernels(traces.load("runs/x/traces"), n=10)  # doctest: +SKIP
    """
    require_table(df, ("rank", "track", "name", "ts_ns", "dur_ns", "device"))
    track = df["track"].astype(str).to_numpy()
    is_kernel = np.isin(track, KERNEL_TRACKS) & (df["device"].to_numpy() >= 0)
    sub = df[is_kernel & (df["dur_ns"].to_numpy() > 0)]
    names = sub["name"].astype(str).map(kernel_name)
    return _top(sub, names, n, "kernel", nested=False)


def _unknown_name(df: pd.DataFrame, name: str) -> SpecError:
    known = [str(c) for c in df["name"].astype("category").cat.categories]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f"close names: {close}" if close else "list names with top_ops(df) or top_kernels(df)"
    return SpecError(f"name={name!r} occurs nowhere in this trace table; {hint}")


def same_name(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """Every slice called ``name``: a summary per rank plus an ``all`` row.

    Columns: count, total_ms, min_us, median_us, p90_us, max_us, std_us. The occurrences
    themselves (rank, step, track, ts_ns, dur_ns) are in ``result.attrs["occurrences"]``,
    which ``plot_same_name`` draws as a distribution.

    >>> from hpcprof_kit import traces                               # doctest: +SKIP
    >>> traces.same_name(traces.load("runs/x/traces"), "aten::mm")   # doctest: +SKIP
    """
    import pandas as pd

    require_table(df, ("rank", "track", "name", "ts_ns", "dur_ns", "step"))
    names = df["name"].astype(str)
    hit = (names == name).to_numpy()
    if not hit.any():
        hit = (names.map(kernel_name) == name).to_numpy()  # unitrace kernels by bare name
    if not hit.any():
        raise _unknown_name(df, name)
    cols = ["rank", "step", "track", "ts_ns", "dur_ns"]
    occ = df.loc[hit, cols].sort_values(["rank", "ts_ns"]).reset_index(drop=True)
    occ["track"] = occ["track"].astype(str)

    def summary(d: pd.Series) -> dict:
        us = d.to_numpy(dtype=float) / 1e3
        return {
            "count": us.size,
            "total_ms": us.sum() / 1e3,
            "min_us": us.min(),
            "median_us": float(np.median(us)),
            "p90_us": float(np.percentile(us, 90)),
            "max_us": us.max(),
            "std_us": float(us.std()),
        }

    rows = {str(r): summary(g["dur_ns"]) for r, g in occ.groupby("rank")}
    rows["all"] = summary(occ["dur_ns"])
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "rank"
    table.attrs["name"] = name
    table.attrs["occurrences"] = occ
    return table
