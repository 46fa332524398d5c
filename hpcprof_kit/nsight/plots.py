"""Pictures of Nsight tables, each a ``Plot(fig, table)`` like the kit's trace plots.

>>> import pandas as pd
>>> table = pd.DataFrame({"name": ["gemm", "relu"], "calls": [10, 10],
...                       "total_ns": [9_000_000, 1_000_000], "share": [0.9, 0.1]})
>>> fig, top = plot_top_kernels(table, top=1)
>>> top["name"].tolist()
['gemm']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprof_kit.errors import SpecError
from hpcprof_kit.traces.plots.figure import COLORS, Plot, new_figure

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def top_rows(table: pd.DataFrame, top: int = 10, rank: int | None = None) -> pd.DataFrame:
    """The ``top`` rows of an nsys stats summary by total time (one rank's, or summed over ranks
    when ``rank`` is None); ties by name. ``traces.top_kernels`` is the same for a trace."""
    if table.empty:
        raise SpecError(
            "the summary has no rows: the report holds no data of this kind (a CPU-only run "
            "has no kernels; profile with --trace=cuda on a GPU node)"
        )
    data = table
    if "rank" in table.columns:
        if rank is not None:
            data = table[table["rank"] == rank]
            if data.empty:
                raise SpecError(
                    f"rank {rank} is not in the table (ranks: {sorted(set(table['rank']))})"
                )
        else:
            data = table.groupby("name", as_index=False)[["calls", "total_ns"]].sum()
            data["share"] = data["total_ns"] / data["total_ns"].sum()
    columns = [c for c in ("name", "calls", "total_ns", "avg_ns", "share") if c in data.columns]
    ordered = data.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable")
    return ordered[columns].head(top).reset_index(drop=True)


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def plot_top_kernels(
    table: pd.DataFrame, top: int = 10, rank: int | None = None, title: str = "Top kernels"
) -> Plot:
    """Horizontal bars of total time (ms) for the heaviest rows of a summary, share written on
    each bar. Works for any summary (kernels, API calls, OS runtime, NVTX ranges)."""
    data = top_rows(table, top=top, rank=rank)
    fig = new_figure(8, 0.4 * len(data) + 1.2)
    ax = fig.add_subplot()
    ms = data["total_ns"] / 1e6
    ax.barh(range(len(data)), ms, color=COLORS["gpu"])
    ax.set_yticks(range(len(data)), [_short(n) for n in data["name"]])
    ax.invert_yaxis()
    for y, (value, share) in enumerate(zip(ms, data["share"], strict=True)):
        ax.text(value, y, f" {share:.0%}", va="center", fontsize=8)
    ax.set_xlabel("total time (ms)")
    ax.set_title(title if rank is None else f"{title} (rank {rank})")
    return Plot(fig, data)


def plot_roofline(roofline: pd.DataFrame) -> Plot:
    """Each launch at (arithmetic intensity, achieved FLOP/s) under the device's ceilings
    (:func:`hpcprof_kit.nsight.ncu.roofline_table`), log-log."""
    import numpy as np

    if roofline.empty:
        raise SpecError("the roofline table is empty: no launch executed floating-point work")
    fig = new_figure(7, 4.5)
    ax = fig.add_subplot()
    lo = max(roofline["intensity"].min() / 10, 1e-3)
    hi = roofline["intensity"].max() * 10
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    for precision, part in roofline.groupby("precision", sort=True):
        bw, peak = part["peak_bytes_per_s"].iloc[0], part["peak_flop_per_s"].iloc[0]
        if np.isfinite(bw) and np.isfinite(peak):
            ax.plot(x, np.minimum(x * bw, peak), lw=1, label=f"{precision} ceiling")
        ax.scatter(part["intensity"], part["flop_per_s"], s=30, label=f"{precision} launches")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / DRAM byte)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title("Roofline")
    ax.legend(fontsize=8)
    return Plot(fig, roofline)
