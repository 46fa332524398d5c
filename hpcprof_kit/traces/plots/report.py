"""The plots of a report's panes: each drawn from the same tables the pane holds."""

from __future__ import annotations

from typing import Any

import numpy as np

from hpcprof_kit.traces.plots.figure import COLORS, Plot, new_figure


def kernel_histograms(rep: Any) -> Plot | None:
    """Kernel durations (all kernels) and launch delays, log-scaled histograms."""
    from hpcprof_kit.traces.view.signals import kernel_rows

    df = rep.table
    rows = kernel_rows(df)
    if not rows.any():
        return None
    us = df["dur_ns"].to_numpy()[rows] / 1e3
    fig = new_figure(9.0, 3.0)
    ax1, ax2 = fig.subplots(1, 2)
    bins = np.logspace(np.log10(max(us.min(), 0.1)), np.log10(max(us.max(), 1.0)), 40)
    ax1.hist(us, bins=bins, color=COLORS["gpu"])
    ax1.set_xscale("log")
    ax1.axvline(10, color="k", ls="--", lw=0.8, label="10 µs")
    ax1.set_xlabel("kernel duration (µs)")
    ax1.set_ylabel("kernels")
    ax1.legend(fontsize=7)
    ax1.set_title(f"{us.size} kernels", fontsize=9)
    try:
        from hpcprof_kit.traces.analyses.device_idle import launch_stats

        delay = launch_stats(df)["launch_delay_ns"].to_numpy() / 1e3
    except Exception:  # noqa: BLE001 - no launches: the pane says why
        delay = np.array([])
    if delay.size:
        ax2.hist(np.maximum(delay, 0.01), bins=40, color=COLORS["cpu"])
        ax2.set_xlabel("launch delay (µs)")
        ax2.set_title(f"{delay.size} launches", fontsize=9)
    else:
        ax2.axis("off")
        ax2.text(0, 0.5, "no kernel launches paired", fontsize=8)
    return Plot(fig, rep.panes["kernels"].tables.get("durations"))


def _heatmap(rep: Any) -> Any:
    from hpcprof_kit.traces.plots import charts as plots

    steps = rep.panes["distributed"].tables["rank_steps"].set_index("step")
    steps.attrs["value"] = "busy"
    return plots.plot_rank_heatmap(steps)


def pane_figures(rep: Any, pane: str) -> dict[str, Any]:
    """name -> Plot for ``pane`` (empty when the pane has nothing to draw)."""
    from hpcprof_kit.traces.plots import charts as plots
    from hpcprof_kit.traces.plots import spread
    from hpcprof_kit.traces.plots.memory import plot_memory

    tables = rep.panes[pane].tables
    out: dict[str, Any] = {}
    if pane == "overview" and "steps" in tables:
        if "rank_steps" in rep.panes["distributed"].tables:
            # first: a rank slow in a few steps only shows here, and in no median
            out["rank_heatmap"] = _heatmap(rep)
        out["breakdown"] = plots.plot_breakdown(rep.breakdown)
    elif pane == "kernels" and "top_kernels" in tables and rep.table is not None:
        hist = kernel_histograms(rep)
        if hist is not None:
            out["durations"] = hist
    elif pane == "memory" and "peaks" in tables and rep.table is not None:
        out["memory"] = plot_memory(rep.table)
    elif pane == "distributed" and "rank_steps" in tables:
        out["rank_heatmap"] = _heatmap(rep)
        if int(rep.breakdown["rank"].nunique()) > 1:
            out["breakdown_spread"] = spread.plot_breakdown_spread(rep.breakdown)
    return out
