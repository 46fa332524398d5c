"""Memory over time as a picture: the allocated bytes of each rank from its ``[memory]`` events,
with the table drawn (:func:`hpcprof_kit.traces.analyses.memory.memory_timeline`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.errors import SpecError, TraceFormatError
from hpcprof_kit.traces.analyses.breakdown import step_spans
from hpcprof_kit.traces.analyses.memory import NO_MEMORY, _allocated, memory_timeline
from hpcprof_kit.traces.analyses.spread import check_count
from hpcprof_kit.traces.plots.figure import Plot, new_figure

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

UNITS = (("GiB", 30), ("MiB", 20), ("KiB", 10), ("bytes", 0))  # the plot's unit: the largest


def _ranks_to_draw(tl: pd.DataFrame, ranks, max_ranks: int) -> tuple[list[int], str]:
    """The ranks ``plot_memory`` draws, and what its title says about how they were picked."""
    present = sorted(set(tl["rank"].tolist()))
    if ranks is None:
        peaks = tl.groupby("rank")["allocated_bytes"].max().reset_index()
        top = peaks.sort_values(["allocated_bytes", "rank"], ascending=[False, True])
        ranks = sorted(top["rank"].tolist()[:max_ranks])
        note = f" ({len(ranks)} of {len(present)} ranks: the highest peaks)"
        return ranks, note if len(ranks) < len(present) else ""
    ranks = [ranks] if isinstance(ranks, int) else list(ranks)
    unknown = [r for r in ranks if r not in present]
    if unknown or not ranks:
        which = f"rank {unknown[0]} has no [memory] events" if unknown else "no rank is named"
        raise SpecError(f"ranks={ranks!r}: {which}; pick from {present}")
    return ranks, ""


def plot_memory(df: pd.DataFrame, *, ranks: list[int] | None = None, max_ranks: int = 8) -> Plot:
    """Allocated memory over time, one line per rank, one panel per device, the ProfilerStep
    boundaries of the first rank drawn marked (dotted lines, ``#N`` above).

    ``ranks`` picks the ranks to draw; by default all of them, or above ``max_ranks`` the
    ``max_ranks`` with the highest peak. The table has one row per point drawn: ``rank,
    device, step, ts_ns, t_ms`` (from the first step or event drawn) and ``allocated_bytes``;
    ``table.attrs["steps"]`` holds the boundaries (``rank, step, start_ms, end_ms``).
    A trace without ``[memory]`` events raises a TraceFormatError that says how to record
    them.

    >>> from hpcprof_kit import traces
    >>> traces.plot_memory(traces.empty_table())
    Traceback (most recent call last):
    ...
    hpcprof_kit.errors.TraceFormatError: the trace table has no [memory] events, so there is no memory to plot; record them with torch.profiler.profile(..., profile_memory=True) and load the new traces
    """
    tl = memory_timeline(df)
    if tl.empty:
        raise TraceFormatError(NO_MEMORY.format(what="plot"))
    max_ranks = check_count("max_ranks", max_ranks)
    tl = tl.assign(allocated_bytes=_allocated(tl))
    ranks, picked = _ranks_to_draw(tl, ranks, max_ranks)
    tl = tl[tl["rank"].isin(ranks)]
    steps = step_spans(df)
    steps = steps[(steps["rank"] == min(ranks)) & (steps["step"] >= 0)]
    t0 = int(min(tl["ts_ns"].min(), steps["start_ns"].min() if len(steps) else np.inf))
    table = tl[["rank", "device", "step", "ts_ns"]].assign(
        t_ms=(tl["ts_ns"] - t0) / 1e6, allocated_bytes=tl["allocated_bytes"]
    )
    table.attrs["steps"] = steps[["rank", "step"]].assign(
        start_ms=(steps["start_ns"] - t0) / 1e6, end_ms=(steps["end_ns"] - t0) / 1e6
    )
    devices = sorted(set(table["device"].tolist()))
    peak = int(table["allocated_bytes"].max())
    unit, scale = next((u, 2**p) for u, p in UNITS if peak >= 2**p or p == 0)
    fig = new_figure(7.5, 1.2 + 2.2 * len(devices))
    axes = fig.subplots(len(devices), 1, sharex=True, squeeze=False)[:, 0]
    for ax, device in zip(axes, devices, strict=True):
        for rank, line in table[table["device"] == device].groupby("rank"):
            ax.step(
                line["t_ms"], line["allocated_bytes"] / scale, where="post", label=f"rank {rank}"
            )
        for row in table.attrs["steps"].itertuples():
            ax.axvline(row.start_ms, color="grey", ls=":", lw=0.8)
            ax.axvline(row.end_ms, color="grey", ls=":", lw=0.8)
            ax.annotate(f"#{row.step}", (row.start_ms, 1), xycoords=("data", "axes fraction"),
                        fontsize=7, va="bottom")  # fmt: skip
        ax.set_ylabel(f"{'host' if device < 0 else f'device {device}'}: {unit} allocated")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    axes[-1].set_xlabel("ms from the first step drawn (or the first [memory] event)")
    fig.suptitle(
        f"allocated memory over time{picked}; dotted: the ProfilerStep spans of rank {min(ranks)}",
        fontsize=9,
    )
    return Plot(fig, table.reset_index(drop=True))
