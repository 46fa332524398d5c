"""Which ops, kernels and your own ranges dominate: top tables with self time, same-name slices."""

from __future__ import annotations

import copy
import difflib
import re
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.errors import KitWarning, SpecError
from hpcprof_kit.traces.analyses.breakdown import STEP_PREFIX, bare, require_table, text_test
from hpcprof_kit.traces.table.order import by_value

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# unitrace appends the launch geometry to kernel names: "gemm[SIMD32 {8; 1; 1} {64; 1; 1}]"
_GEOMETRY = re.compile(r"\[SIMD\d*[^\]]*\]$")
KERNEL_TRACKS = ("gpu", "comm")
# torch.profiler's category of record_function ranges on the host (and their device mirror).
RANGE_CAT = "user_annotation"
DEVICE_RANGE_CAT = "gpu_user_annotation"


def self_times(
    ts: np.ndarray, dur: np.ndarray, thread: np.ndarray, created: np.ndarray | None = None
) -> np.ndarray:
    """Exclusive time of each event: its duration minus its direct children on the same thread.

    Events nest when one starts inside another on the same thread; a child that overruns its
    parent (a defect some traces have) is clipped to the parent's end. Two events with the
    same start and duration (``aten::matmul`` around an ``aten::mm`` of the same span) nest in
    the order they were created: ``created`` is torch's ``External id`` (``ext_id``, negative
    when missing), which grows as ops are called, so the outer op comes first whatever the
    order of the table's rows.

    >>> self_times(np.array([0, 2, 3]), np.array([10, 5, 1]), np.array([0, 0, 0])).tolist()
    [5, 4, 1]
    """
    import pandas as pd

    n = ts.size
    order = _nest_order(ts, dur, thread, created)  # by thread, start, longest, created
    t_ord, s_ord, e_ord = thread[order], ts[order], (ts + dur)[order]
    # An event's parent is the last event before it (same thread) still running when it
    # starts: the top of the stack a sequential scan would keep. Each event looks back
    # from its predecessor, jumping over whole runs already known to end before it.
    look = np.arange(-1, n - 1)
    if n:
        first = np.r_[True, t_ord[1:] != t_ord[:-1]]
        reach = pd.Series(e_ord).groupby(np.cumsum(first)).cummax().to_numpy()
        # a thread's first event, and one that starts after all before it ended: no parent
        look[first | (s_ord >= np.r_[0, reach[:-1]])] = -1
    parent = np.full(n, -1)
    todo = np.flatnonzero(look >= 0)
    while todo.size:
        at = look[todo]
        found = e_ord[at] > s_ord[todo]
        parent[todo[found]] = at[found]
        todo, at = todo[~found], at[~found]
        look[todo] = look[at]  # everything between look[at] and at ended before at started
        todo = todo[look[todo] >= 0]
    child = np.zeros(n, dtype=np.int64)
    kids = np.flatnonzero(parent >= 0)
    up = parent[kids]
    np.add.at(child, up, np.minimum(e_ord[kids], e_ord[up]) - s_ord[kids])
    out = np.empty(n, dtype=np.int64)
    out[order] = dur[order] - child
    return out


def _nest_order(
    ts: np.ndarray, dur: np.ndarray, thread: np.ndarray, created: np.ndarray | None = None
) -> np.ndarray:
    """``np.lexsort((created, -dur, ts, thread))``, faster on traces: their times are nearly
    sorted already and rarely tie, and they have few threads."""
    import pandas as pd

    codes, uniques = pd.factorize(thread, sort=True)
    low = int(ts.min()) if ts.size else 0
    if len(uniques) < 2**15 and (ts.size == 0 or int(ts.max()) - low < 2**48):
        # thread and start in one key: each thread's run of the table is one sorted run
        key = (codes.astype(np.int64) << 48) | (ts - low)
    else:
        key = None
    order = np.argsort(ts if key is None else key, kind="stable")
    start = (ts if key is None else key)[order]
    ties = np.flatnonzero(start[1:] == start[:-1])
    if ties.size:  # equal starts: longest first, then first created, then in input order
        at = np.union1d(ties, ties + 1)
        run = np.cumsum(np.r_[0, start[at[1:]] != start[at[:-1]]])
        rows = order[at]
        made = np.zeros(rows.size, np.int64) if created is None else created[rows]
        made = np.where(made < 0, np.iinfo(np.int64).max, made)  # unknown: after the known
        order[at] = rows[np.lexsort((made, -dur[rows], run))]
    if key is None:
        order = order[np.argsort(codes[order], kind="stable")]
    return order


def _thread_codes(sub: pd.DataFrame) -> np.ndarray:
    """One number per (rank, pid, tid) of each row, pid and tid compared as text."""
    key = np.zeros(len(sub), dtype=np.int64)
    for col in ("rank", "pid", "tid"):
        codes, n = _text_codes(sub[col])
        key = key * n + codes
    return key


def _text_codes(column: pd.Series) -> tuple[np.ndarray, int]:
    """Codes 0..n-1 of a column's values as text (equal text, equal code; missing values
    share one code), and n."""
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        labels = pd.Series([*column.cat.categories.astype(str), None], dtype=str)
        of_label, uniques = pd.factorize(labels, use_na_sentinel=False)
        return of_label[column.cat.codes.to_numpy()].astype(np.int64), len(uniques)
    integers = pd.api.types.is_integer_dtype(column.dtype)  # equal as text iff equal
    values = column.to_numpy() if integers else column.astype(str)
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    return codes.astype(np.int64), max(len(uniques), 1)


def _top(
    sub: pd.DataFrame, names: pd.Series, n: int, what: str, nested: bool, label=str
) -> pd.DataFrame:
    import pandas as pd

    if not isinstance(n, int) or n < 1:
        raise SpecError(f"n={n!r} is not a positive whole number of rows; pass e.g. n=20")
    ts = sub["ts_ns"].to_numpy(dtype=np.int64)
    dur = sub["dur_ns"].to_numpy(dtype=np.int64)
    created = sub["ext_id"].to_numpy(dtype=np.int64) if "ext_id" in sub else None
    self_ns = self_times(ts, dur, _thread_codes(sub), created) if nested and len(sub) else dur
    keys, text = _name_keys(names, label)
    frame = pd.DataFrame({what: keys, "dur_ns": dur, "self_ns": self_ns})
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
    if text is not None:  # grouped by numbers: each row of the table gets its name
        table.index = pd.Index(text[table.index.to_numpy()], name=what)
    all_self = int(self_ns.sum())  # whole ns: the same sum in any order of the rows
    table["share"] = g["self_ns"].sum().to_numpy() / all_self if all_self else 0.0
    return by_value(table, "self_ms").head(n)


def _name_keys(names: pd.Series, label=str) -> tuple[np.ndarray, np.ndarray | None]:
    """What :func:`_top` groups rows by, ``label(name)``: for a column of categories, one
    whole number per distinct label and the label of each number (grouping by numbers is
    several times faster than hashing every row's text, and each category is labelled once);
    else each row's label, and None.

    >>> import pandas as pd
    >>> keys, text = _name_keys(pd.Series(["k[SIMD32 {1}]", "k", "m"], dtype="category"),
    ...                         kernel_name)
    >>> keys.tolist(), text.tolist()
    ([0, 0, 1], ['k', 'm'])
    """
    import pandas as pd

    codes = names.cat.codes.to_numpy() if isinstance(names.dtype, pd.CategoricalDtype) else None
    if codes is None or (codes < 0).any():  # not categories, or missing names among them
        text = names.astype(str)
        return (text if label is str else text.map(label)).to_numpy(), None
    labels = np.array([label(str(c)) for c in names.cat.categories], dtype=object)
    of_label, uniques = pd.factorize(labels)
    return of_label[codes], np.asarray(uniques, dtype=object)


def top_ops(df: pd.DataFrame, n: int = 20) -> pd.DataFrame:
    """The host ops (``cpu_op``) that take the most self time, all ranks together.

    Columns: count, total_ms, self_ms (minus nested ops on the same thread), mean_us, max_us,
    share (of all ops' self time). Your own ``record_function`` ranges are in
    :func:`user_ranges`.

    >>> from hpcprof_kit import traces                       # doctest: +SKIP
    >>> traces.top_ops(traces.load("runs/x/traces"), n=10)   # doctest: +SKIP
    """
    require_table(df, ("rank", "track", "cat", "name", "ts_ns", "dur_ns", "device"))
    df = bare(df)
    is_op = text_test(df["cat"], lambda s: s == "cpu_op") & (df["device"].to_numpy() < 0)
    sub = df[is_op & (df["dur_ns"].to_numpy() > 0)]
    return _top(sub, sub["name"], n, "op", nested=True)


def is_user_range(df: pd.DataFrame) -> np.ndarray:
    """Rows that are ``record_function`` ranges on the host's cpu track: yours, and torch's
    own (``Optimizer.step#...``); not ProfilerStep spans, not collectives (comm track)."""
    df = bare(df)
    cat = text_test(df["cat"], lambda s: s == RANGE_CAT)
    on_cpu = text_test(df["track"], lambda s: s == "cpu")
    step = text_test(df["name"], lambda s: s.str.startswith(STEP_PREFIX))
    return cat & on_cpu & (df["device"].to_numpy() < 0) & ~step


def user_ranges(df: pd.DataFrame, n: int = 20) -> pd.DataFrame:
    """Your ``record_function`` / ``trace_func`` / ``capture`` ranges, all ranks together
    (with the ranges torch itself records, such as ``Optimizer.step#Adam.step``).

    Same columns as :func:`top_ops` (``self_ms``: minus the ranges nested inside, on the
    same thread), plus ``device_ms`` on device traces: the time the device spent inside the
    range: torch's ``gpu_user_annotation`` copy of it where the trace has one (CUDA, ROCm),
    else the summed duration of the device events launched while the range ran on its rank
    (XPU traces, which have no such copy). A table without ranges warns and is empty.

    >>> from hpcprof_kit import traces                           # doctest: +SKIP
    >>> traces.user_ranges(traces.load("runs/x"))                # doctest: +SKIP
    """
    import warnings

    require_table(df, ("rank", "track", "cat", "name", "ts_ns", "dur_ns", "device"))
    df = bare(df)
    sub = df[is_user_range(df) & (df["dur_ns"].to_numpy() > 0)]
    if sub.empty:
        warnings.warn(
            "no record_function ranges in this trace table; wrap code in "
            "record_function('name'), @trace_func or capture('name') (hpcprof_kit.profiling) "
            "and profile again",
            KitWarning,
            stacklevel=2,
        )
    table = _top(sub, sub["name"], n, "range", nested=True)
    on_device = df[text_test(df["cat"], lambda s: s == DEVICE_RANGE_CAT)]
    if len(on_device):
        device_ns = on_device.groupby(on_device["name"].astype(str))["dur_ns"].sum()
        table["device_ms"] = device_ns.reindex(table.index).fillna(0).to_numpy() / 1e6
    elif len(table):
        launched = _launched_device_ns(df, sub)
        if launched is not None:
            device_ns = launched.groupby(sub["name"].astype(str).to_numpy()).sum()
            table["device_ms"] = device_ns.reindex(table.index).fillna(0).to_numpy() / 1e6
    return table


def _launched_device_ns(df: pd.DataFrame, ranges: pd.DataFrame) -> pd.Series | None:
    """Per range row: the summed duration of the device events launched (runtime call with a
    correlation id) while the range ran on its rank; None when the table has no launches."""
    import pandas as pd

    corr = df["corr"].to_numpy()
    call = text_test(df["track"], lambda s: s == "runtime") & (corr >= 0)
    dev = (df["device"].to_numpy() >= 0) & (corr >= 0) & ~call
    dev &= text_test(df["track"], lambda s: s.isin(("gpu", "comm", "memcpy", "memset")))
    if not call.any() or not dev.any():
        return None
    rank = df["rank"].to_numpy().astype(np.int64)
    key = (rank << 40) | (corr.astype(np.int64) & ((1 << 40) - 1))
    dur = pd.Series(df["dur_ns"].to_numpy()[dev]).groupby(key[dev]).sum()
    calls = pd.DataFrame({"rank": rank[call], "ts": df["ts_ns"].to_numpy()[call]})
    calls["ns"] = dur.reindex(key[call]).fillna(0).to_numpy(dtype=np.int64)
    calls = calls.sort_values(["rank", "ts"], kind="stable")
    out = np.zeros(len(ranges), dtype=np.int64)
    r_rank = ranges["rank"].to_numpy().astype(np.int64)
    r_start = ranges["ts_ns"].to_numpy()
    r_end = r_start + ranges["dur_ns"].to_numpy()
    for rk, rows in calls.groupby("rank"):
        ts, total = rows["ts"].to_numpy(), np.concatenate([[0], np.cumsum(rows["ns"].to_numpy())])
        mine = r_rank == rk
        lo = np.searchsorted(ts, r_start[mine], side="left")
        hi = np.searchsorted(ts, r_end[mine], side="left")
        out[mine] = total[hi] - total[lo]
    return pd.Series(out, index=ranges.index)


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
    df = bare(df)
    is_kernel = text_test(df["track"], lambda s: s.isin(KERNEL_TRACKS))
    is_kernel &= df["device"].to_numpy() >= 0
    sub = df[is_kernel & (df["dur_ns"].to_numpy() > 0)]
    return _top(sub, sub["name"], n, "kernel", nested=False, label=kernel_name)


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
    whole, df = df, bare(df)
    hit = text_test(df["name"], lambda s: s == name)
    if not hit.any():  # unitrace kernels by bare name
        hit = text_test(df["name"], lambda s: s.map(kernel_name, na_action="ignore") == name)
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
    occ.attrs = copy.deepcopy(whole.attrs)  # the run's metadata goes with the occurrences
    table.attrs["occurrences"] = occ
    return table
