"""The report's operators and kernels panes: top ops and ranges, top kernels, the op that
launched each, their durations, and the launches with their delay split into the queue and
the launch's own."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces.analyses.breakdown import bare, text_test
from hpcprof_kit.traces.analyses.launch_pacing import launches_of
from hpcprof_kit.traces.reporting.pane import PANE_TITLES, Pane
from hpcprof_kit.traces.view.run_view import RunView
from hpcprof_kit.traces.view.signals import SHORT_KERNEL_NS, kernel_rows

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def operators(view: RunView, top: int) -> Pane:
    from hpcprof_kit.traces.analyses.ops import top_ops, user_ranges

    df = view.df
    pane = Pane(PANE_TITLES["operators"])
    ops = top_ops(df, n=top)
    if len(ops):
        pane.tables["top_ops"] = ops
    else:
        pane.missing["top_ops"] = "no cpu_op events: the profiler recorded no host operators"
    with warnings.catch_warnings():  # no ranges is a fine answer here: the table is left out
        warnings.simplefilter("ignore")
        ranges = user_ranges(df, n=top)
    if len(ranges):
        pane.tables["user_ranges"] = ranges
    pane.missing["input_shapes"] = (
        "not in this pane: traces.event_args(df, kinds=['inputs']) gives each op's input "
        "dims and types, when the run was profiled with record_shapes=True"
    )
    return pane


def kernels(view: RunView, top: int) -> Pane:
    from hpcprof_kit.traces.analyses.ops import top_kernels

    df = view.df
    pane = Pane(PANE_TITLES["kernels"])
    table = top_kernels(df, n=top)
    if table.empty:
        why = (
            "no device kernels: a CPU-only trace; record on a GPU with "
            "ProfilerActivity.CUDA or ProfilerActivity.XPU"
        )
        for name in ("top_kernels", "launched_by", "durations", "launches"):
            pane.missing[name] = why
        return pane
    pane.tables["top_kernels"] = table
    pane.tables["launched_by"] = launched_by(df, list(table.index)[:top])
    pane.tables["durations"] = kernel_durations(df, list(table.index)[:top])
    try:
        from hpcprof_kit.traces.analyses.device_idle import launch_stats, launch_summary

        stats = launch_stats(df)
        pane.tables["launches"] = launch_table(stats, launch_summary(stats))
        pane.notes.append(
            "launches: delay = the kernel's start minus the end of the call that launched it "
            "(HTA's definition); queued = the part of it the kernel waited behind earlier "
            "work on its device (the host running ahead, which is how a busy device should "
            "look); own = the rest, the launch's own delay; delay_outliers counts own delays "
            "over 0.1 ms, hta_delay_outliers HTA's count of whole delays"
        )
    except TraceFormatError as exc:
        pane.missing["launches"] = str(exc)
    short = pane.tables["durations"]
    if len(short):
        n = int(short["count"].sum())
        pane.notes.append(f"{int(short['under_10us'].sum())} of these {n} kernels last under 10 µs")
    return pane


def launch_table(stats: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """The kernels pane's launches per rank, in ms: the launch call's and the kernel's
    duration, the delay (HTA's) split into the queue and the launch's own, and the outliers.
    """
    import pandas as pd

    from hpcprof_kit.traces.analyses.device_idle import LAUNCH_DELAY_CUTOFF_NS

    s = stats.assign(own_ns=stats["launch_delay_ns"] - stats["queue_ns"])
    s["queued"] = s["queue_ns"] > 0
    s["own_outlier"] = s["own_ns"] > LAUNCH_DELAY_CUTOFF_NS
    g = s.groupby("rank", sort=True)
    out = pd.DataFrame({"rank": g.size().index.to_numpy(dtype=np.int64)})
    out["launches"] = g.size().to_numpy(dtype=np.int64)
    for col, name in (("cpu_duration_ns", "call"), ("gpu_duration_ns", "kernel")):
        out[f"{name}_p50_ms"] = g[col].median().to_numpy() / 1e6
    out["delay_p50_ms"] = g["launch_delay_ns"].median().to_numpy() / 1e6
    out["queued"] = g["queued"].sum().to_numpy(dtype=np.int64)
    out["queue_p50_ms"] = g["queue_ns"].median().to_numpy() / 1e6
    out["own_delay_p50_ms"] = g["own_ns"].median().to_numpy() / 1e6
    out["own_delay_p90_ms"] = g["own_ns"].quantile(0.9).to_numpy() / 1e6
    out["delay_outliers"] = g["own_outlier"].sum().to_numpy(dtype=np.int64)
    out["hta_delay_outliers"] = summary["delay_outliers"].to_numpy(dtype=np.int64)
    out["runtime_outliers"] = summary["runtime_outliers"].to_numpy(dtype=np.int64)
    out["short_kernels"] = summary["short_kernels"].to_numpy(dtype=np.int64)
    return out


def kernel_durations(df: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Per kernel of ``names``: count, min / p10 / median / p90 / max duration (µs) and how
    many last under 10 µs."""
    import pandas as pd

    df = bare(df) if df.attrs else df  # the view's table is bare already
    sub = df[["name", "dur_ns"]][kernel_rows(df)]  # the columns read, not the table's all
    kernel_at, kernel_names = _kernel_codes(sub["name"])
    number = {name: i for i, name in enumerate(kernel_names)}
    dur = sub["dur_ns"].to_numpy()
    rows = []
    for name in names:
        us = dur[kernel_at == number.get(name, -2)] / 1e3
        if us.size == 0:
            continue
        q = np.quantile(us, [0.0, 0.1, 0.5, 0.9, 1.0])
        rows.append(
            {
                "kernel": name,
                "count": int(us.size),
                "min_us": q[0],
                "p10_us": q[1],
                "median_us": q[2],
                "p90_us": q[3],
                "max_us": q[4],
                "under_10us": int((us < SHORT_KERNEL_NS / 1e3).sum()),
            }
        )
    return pd.DataFrame(rows)


def launched_by(df: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Per kernel of ``names``: the host op that launched it most often (kernel -> launch
    call by correlation id -> the op of the same External id), with how many of its
    launches that op made."""
    import pandas as pd

    df = bare(df) if df.attrs else df  # the view's table is bare already
    corr = df["corr"].to_numpy()
    ext = df["ext_id"].to_numpy()
    kern = np.flatnonzero(kernel_rows(df) & (corr >= 0))
    calls = np.flatnonzero(text_test(df["track"], lambda s: s == "runtime") & (corr >= 0))
    ops = np.flatnonzero(text_test(df["cat"], lambda s: s == "cpu_op") & (ext >= 0)
                         & (df["device"].to_numpy() < 0))  # fmt: skip
    cols = ["kernel", "op", "launches", "of_kernel"]
    if not kern.size or not calls.size or not ops.size:
        return pd.DataFrame([], columns=cols)
    rank = df["rank"].to_numpy().astype(np.int64)
    # each kernel's first call of its (rank, correlation), and that call's innermost op of
    # its (rank, External id): the shortest, the first of equals in a quicksort by duration
    # (as pandas sorts)
    ops = ops[np.argsort(df["dur_ns"].to_numpy()[ops], kind="quicksort")]
    kernel_at, kernel_names = _kernel_codes(df["name"].iloc[kern])
    number = {name: i for i, name in enumerate(kernel_names)}
    wanted = np.isin(kernel_at, [number[n] for n in names if n in number])
    k = kern[wanted]
    call = launches_of(k, calls, rank, corr)
    op = np.full(k.size, -1, dtype=np.int64)
    op[call >= 0] = launches_of(call[call >= 0], ops, rank, ext)
    label = np.empty(k.size, dtype=object)  # None: no op found
    label[op >= 0] = _texts(df["name"], op[op >= 0])
    k = pd.DataFrame({"kernel": kernel_at[wanted], "op": label})
    # every (kernel, op) pair counted at once over integer codes: a text comparison of
    # every row per kernel name cost more than the rest of this table
    op_at, op_names = _op_codes(k["op"])
    pairs = np.bincount(
        k["kernel"].to_numpy() * len(op_names) + op_at,
        minlength=len(kernel_names) * len(op_names),
    ).reshape(len(kernel_names), len(op_names))
    rows = []
    for name in names:
        counts = pairs[number[name]] if name in number else None
        if counts is None or not counts.any():
            continue
        made = [(op_names[j], int(counts[j])) for j in np.flatnonzero(counts)]
        best = sorted(made, key=lambda kv: (-kv[1], kv[0]))[0]
        rows.append(
            {"kernel": name, "op": best[0], "launches": best[1], "of_kernel": int(counts.sum())}
        )
    return pd.DataFrame(rows, columns=cols)


def _texts(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """The text of ``rows`` of a column (a category column looked up by code, "nan" for a
    missing one), not of every row."""
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        labels = np.array([*column.cat.categories.astype(str), "nan"], dtype=object)
        return labels[column.cat.codes.to_numpy()[rows]]  # code -1 takes the last slot
    return column.to_numpy()[rows].astype(str).astype(object)


def _kernel_codes(column: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Each row's kernel name (:func:`~hpcprof_kit.traces.analyses.ops.kernel_name`) as a number into
    the list of names it returns (-1: no name); a category column is named once per label,
    and rows are then compared as numbers, not as text."""
    import pandas as pd

    from hpcprof_kit.traces.analyses.ops import kernel_name

    if not isinstance(column.dtype, pd.CategoricalDtype):
        at, names = pd.factorize(column.map(kernel_name).astype(str))
        return at, [str(n) for n in names]
    labels = [str(kernel_name(c)) for c in column.cat.categories]
    number: dict[str, int] = {}
    of_label = np.array([number.setdefault(n, len(number)) for n in labels] + [-1])
    return of_label[column.cat.codes.to_numpy()], list(number)  # code -1 takes the last slot


def _op_codes(column: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Each row's op name as a number into the list of names it returns, a row without an op
    as the name ``(no op found)``."""
    import pandas as pd

    at, names = pd.factorize(column)
    labels = [str(n) for n in names] + ["(no op found)"]
    number: dict[str, int] = {}
    of_label = np.array([number.setdefault(n, len(number)) for n in labels])
    return of_label[at], list(number)  # factorize's -1 (no op) takes the last slot
