"""The report's memory and distributed panes: the memory peaks per step, and per rank and
step the time worked before waiting, the stragglers and their kernels, the comm/compute
overlap and each collective's calls and start skew."""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from hpcprof_kit.traces.analyses import breakdown as bd
from hpcprof_kit.traces.analyses.breakdown import bare, text_test
from hpcprof_kit.traces.reporting.pane import PANE_TITLES, Pane
from hpcprof_kit.traces.view.run_view import RunView
from hpcprof_kit.traces.view.slower import slower_names

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def memory(view: RunView) -> Pane:
    """The peaks per step; the memory events' sizes are read from the files again, which
    the table as loaded names."""
    from hpcprof_kit.traces.analyses.memory import memory_peaks

    pane = Pane(PANE_TITLES["memory"])
    peaks = memory_peaks(view.table)
    if peaks.empty:
        pane.missing["peaks"] = (
            "no [memory] events: profile with profile_memory=True to see the memory timeline "
            "and the peak of each step"
        )
        return pane
    pane.tables["peaks"] = peaks
    pane.notes.append("growth = the step's peak minus what was allocated when it started")
    return pane


def distributed(view: RunView) -> Pane:
    from hpcprof_kit.traces.view.summary import straggler_table

    df, b, steps = view.df, view.b, view.steps
    pane = Pane(PANE_TITLES["distributed"])
    if b.empty:
        pane.missing["rank_steps"] = "the trace has no steps"
        return pane
    pane.tables["rank_steps"] = steps.reset_index()
    pane.tables["stragglers"] = straggler_table(b, steps)
    pane.tables["comm_overlap"] = bd.comm_overlap(b)
    coll = collectives(df)
    if len(coll):
        pane.tables["collectives"] = coll
    else:
        pane.missing["collectives"] = "no communication events in the trace"
    ranks = int(b["rank"].nunique())
    if ranks < 2:
        why = "one rank in the trace: stragglers and start skew need two ranks or more"
        pane.missing["skew"] = why
        pane.notes.append(why)
    else:
        pane.notes.append(
            "start skew compares the ranks' clocks: exact on one node, and across nodes only "
            "as good as their clock synchronisation"
        )
    if ranks > 1:
        table, why = straggler_kernels(df, steps)
        if table is not None:
            pane.tables["straggler_kernels"] = table
        else:
            pane.missing["straggler_kernels"] = why
    pane.missing["message_sizes"] = (
        "not in this pane: traces.event_args(df, kinds=['collectives']) gives each "
        "collective's name, elements, dtype, bytes and group size, where the trace records them"
    )
    return pane


def straggler_kernels(df: pd.DataFrame, steps: pd.DataFrame) -> tuple[Any, str]:
    """The most often named straggler's kernels (ops on a CPU-only trace) against the other
    ranks', in the steps where it was the straggler only: a rank slow in two steps of ten
    has ordinary medians over all ten. Returns (table, "") or (None, why not)."""
    import pandas as pd

    named = [int(r) for r in steps["straggler"] if r >= 0]
    if not named:
        return None, "no step has a straggler: the slowest ranks are within 1 % of each other"
    rank = max(sorted(set(named)), key=named.count)
    in_steps = [int(st) for st, r in zip(steps.index, steps["straggler"], strict=True) if r == rank]
    sub = df[np.isin(df["step"].to_numpy(), in_steps)]
    slower = pd.DataFrame(slower_names(sub, rank, top=10))
    if slower.empty:
        return None, (
            f"rank {rank} was the straggler in steps {in_steps}, but none of its kernels "
            "there is more than 1.1x slower than on the other ranks: look at its host work "
            "(the operators pane) and its data loading"
        )
    steps_text = ",".join(map(str, in_steps))
    return slower.assign(rank=rank, steps=steps_text), ""


def collectives(df: pd.DataFrame) -> pd.DataFrame:
    """Per collective (communication events by name): ranks, calls, total and mean time, and
    the start skew between ranks (the k-th call of a name in a step on every rank: its
    latest start minus its earliest), median and max, in µs."""
    import pandas as pd

    from hpcprof_kit.traces.analyses.ops import kernel_name

    df = bare(df) if df.attrs else df  # the view's table is bare already
    rows = text_test(df["track"], lambda s: s == "comm") & (df["dur_ns"].to_numpy() > 0)
    on_device = rows & (df["device"].to_numpy() >= 0)
    sub = df[on_device if on_device.any() else rows]
    cols = ["collective", "ranks", "calls", "total_ms", "mean_us", "skew_median_us", "skew_max_us"]
    if sub.empty:
        return pd.DataFrame([], columns=cols)
    sub = sub.assign(collective=sub["name"].map(kernel_name).astype(str)).sort_values(
        ["rank", "ts_ns"], kind="stable"
    )
    sub["k"] = sub.groupby(["rank", "step", "collective"]).cumcount()
    out = []
    for name, g in sub.groupby("collective", sort=True):
        starts = g.groupby(["step", "k"])["ts_ns"]
        many = starts.count() > 1
        skew = (starts.max() - starts.min())[many].to_numpy(dtype=float) / 1e3
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out.append(
                {
                    "collective": name,
                    "ranks": int(g["rank"].nunique()),
                    "calls": int(len(g)),
                    "total_ms": float(g["dur_ns"].sum()) / 1e6,
                    "mean_us": float(g["dur_ns"].mean()) / 1e3,
                    "skew_median_us": float(np.median(skew)) if skew.size else math.nan,
                    "skew_max_us": float(skew.max()) if skew.size else math.nan,
                }
            )
    table = pd.DataFrame(out, columns=cols)
    return table.sort_values(["total_ms", "collective"], ascending=[False, True]).reset_index(
        drop=True
    )
