"""Pictures of a trace table, each with the table it draws (its "table twin").

Every function returns a ``Plot(fig, table)``: unpack it (``fig, table = plot_...(df)``) or let
a notebook show it (the picture, then the table). Figures are plain ``matplotlib.figure.Figure``
objects (no pyplot state), so they render headless (Agg) and never pile up in memory.
"""

from __future__ import annotations

import base64
import io
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from hpcprof_kit.errors import SpecError
from hpcprof_kit.traces import breakdown as bd
from hpcprof_kit.traces.ops import is_user_range, same_name

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# lane order inside a rank, top to bottom; instants are not drawn. "annotation" is not a track:
# it is the record_function ranges of the cpu track, drawn in a lane of their own.
LANE_TRACKS = ("annotation", "cpu", "runtime", "comm", "gpu", "memcpy", "memset", "gpu_annotation")
COLORS = {
    "cpu": "#4c72b0",
    "runtime": "#8172b2",
    "comm": "#c44e52",
    "gpu": "#55a868",
    "memcpy": "#dd8452",
    "memset": "#ccb974",
    "gpu_annotation": "#937860",
    "annotation": "#da8bc3",  # record_function ranges (cat user_annotation)
    "compute": "#55a868",
    "hidden_comm": "#e6a3a5",
    "exposed_comm": "#c44e52",
    "memory": "#dd8452",
    "host": "#4c72b0",
    "idle": "#dddddd",
}


class Plot(NamedTuple):
    """A figure and the numbers behind it."""

    fig: Any
    table: pd.DataFrame

    def save(self, path: str, dpi: int = 100) -> str:
        """Write the figure (PNG, SVG or PDF by the file's suffix) and return the path."""
        self.fig.savefig(path, dpi=dpi)
        return str(path)

    def _repr_html_(self) -> str:
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png", dpi=80)
        img = base64.b64encode(buf.getvalue()).decode("ascii")
        return f'<img src="data:image/png;base64,{img}"/>' + self.table.to_html(max_rows=20)


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def lod_bars(
    start: np.ndarray, end: np.ndarray, t0: int, ns_per_px: float, min_px: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Level of detail for one lane: merge events closer than a pixel, never drop one.

    Each event is widened to at least ``min_px`` pixels; events whose widened extents touch
    become one bar. Returns bar starts and ends (ns) and how many events each bar holds.

    >>> s, e, n = lod_bars(np.array([0, 1, 50]), np.array([1, 2, 60]), 0, ns_per_px=10)
    >>> s.tolist(), e.tolist(), n.tolist()
    ([0, 50], [11, 60], [2, 1])
    """
    if start.size == 0:
        return start, end, np.array([], dtype=np.int64)
    order = np.argsort(start, kind="stable")
    s = start[order]
    e = np.maximum(end[order], s + int(np.ceil(min_px * ns_per_px)))
    reach = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], reach[last], last - first + 1


def plot_timeline(
    df: pd.DataFrame,
    ranks: list[int] | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    width_px: int = 1200,
    min_px: float = 1.0,
) -> Plot:
    """Ranks x tracks lanes over time, with step boundaries; sub-pixel events are merged, not hidden.

    Your ``record_function`` ranges get a lane (and colour) of their own, ``annotation``,
    above the ``cpu`` lane of the ops they wrap. The table has one row per lane: events, bars
    drawn, events merged into a neighbour bar, busy time in the window. The figure's title repeats the totals.

    >>> from hpcprof_kit import traces                                   # doctest: +SKIP
    >>> fig, lanes = traces.plot_timeline(traces.load("runs/x/traces"))  # doctest: +SKIP
    """
    import pandas as pd

    bd.require_table(df, ("rank", "track", "name", "ts_ns", "dur_ns"))
    if width_px < 100:
        raise SpecError(f"width_px={width_px} is below 100 pixels; pass width_px=1200 or more")
    if ranks is not None:
        df = df[df["rank"].isin(ranks)]
    if df.empty:
        raise SpecError(
            f"ranks={ranks!r} selects no events; pick ranks from the table's 'rank' column"
        )
    is_step = bd._is_step(df["name"])
    ts = df["ts_ns"].to_numpy(dtype=np.int64)
    te = ts + df["dur_ns"].to_numpy(dtype=np.int64)
    t0 = int(ts.min()) if start_ns is None else int(start_ns)
    t1 = int(te.max()) if end_ns is None else int(end_ns)
    if t1 <= t0:
        raise SpecError(f"end_ns={t1} is not after start_ns={t0}; widen the window")
    npp = (t1 - t0) / width_px
    visible = (te >= t0) & (ts <= t1) & ~is_step
    codes = df["track"].cat.codes.to_numpy()
    cats = list(df["track"].cat.categories)
    rank_arr = df["rank"].to_numpy()
    ranges = is_user_range(df)
    rows, lanes = [], []
    for rank in sorted(np.unique(rank_arr).tolist()):
        in_rank = visible & (rank_arr == rank)
        for track in LANE_TRACKS:
            if track == "annotation":
                sel = in_rank & ranges
            elif track in cats:
                sel = in_rank & (codes == cats.index(track)) & ~ranges
            else:
                continue
            if not sel.any():
                continue
            s, e, n = lod_bars(ts[sel], te[sel], t0, npp, min_px)
            busy = int((np.minimum(e, t1) - np.maximum(s, t0)).clip(0).sum())
            lanes.append((rank, track, s, e))
            rows.append((rank, track, int(sel.sum()), s.size, int(sel.sum()) - s.size, busy / 1e6))
    table = pd.DataFrame(rows, columns=["rank", "track", "events", "bars", "merged", "busy_ms"])
    fig = _figure(width_px / 100, 0.9 + 0.32 * max(len(lanes), 1))
    ax = fig.add_subplot()
    for y, (_rank, track, s, e) in enumerate(lanes):
        xr = np.column_stack([(s - t0) / 1e6, (e - s) / 1e6])
        ax.broken_barh(xr, (y - 0.4, 0.8), facecolors=COLORS[track], linewidth=0)
    _draw_steps(
        ax, df[is_step & (codes == cats.index("cpu") if "cpu" in cats else False)], lanes, t0
    )
    ax.set_yticks(range(len(lanes)), [f"rank {r} {t}" for r, t, _, _ in lanes], fontsize=8)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlim(0, (t1 - t0) / 1e6)
    ax.set_xlabel("time since window start (ms)")
    ax.set_title(
        f"{int(table['events'].sum()):,} events drawn as {int(table['bars'].sum()):,} bars; "
        f"{int(table['merged'].sum()):,} merged into a neighbour (nested or under a pixel apart; "
        f"min width {min_px:g} px)",
        fontsize=9,
    )
    return Plot(fig, table)


def _draw_steps(ax, steps: pd.DataFrame, lanes: list, t0: int) -> None:
    """Dashed step boundaries over each rank's own lanes, labelled with the step number."""
    for rank in sorted({r for r, *_ in lanes}):
        ys = [y for y, lane in enumerate(lanes) if lane[0] == rank]
        mine = steps[steps["rank"] == rank]
        for name, ts, dur in zip(
            mine["name"].astype(str), mine["ts_ns"], mine["dur_ns"], strict=True
        ):
            for x in ((ts - t0) / 1e6, (ts + dur - t0) / 1e6):
                ax.vlines(x, min(ys) - 0.5, max(ys) + 0.5, colors="k", linestyles="dashed", lw=0.7)
            ax.text(
                (ts - t0) / 1e6,
                min(ys) - 0.45,
                name.replace("ProfilerStep", ""),
                fontsize=7,
                va="top",
            )


# The breakdown's legend says the rule (breakdown.step_breakdown) part by part.
PART_LABELS = {
    "compute": "compute (no comm meanwhile)",
    "hidden_comm": "hidden comm (under compute)",
    "exposed_comm": "exposed comm (no compute)",
    "memory": "memory copies/sets",
    "host": "host only (device idle)",
    "idle": "idle",
}


def _breakdown_table(data: pd.DataFrame) -> pd.DataFrame:
    return data if "idle_ns" in data.columns else bd.step_breakdown(data)


def plot_breakdown(data: pd.DataFrame) -> Plot:
    """Stacked bars per rank and step: compute, hidden comm, exposed comm, memory, host, idle (ms).

    ``data`` is a trace table or a ``step_breakdown`` result. Compute comes first: time when
    compute and communication run together is *hidden comm*, communication alone is *exposed
    comm* (what the step waited for); the legend says so part by part.

    >>> from hpcprof_kit import traces                                   # doctest: +SKIP
    >>> fig, ms = traces.plot_breakdown(traces.load("runs/x/traces"))    # doctest: +SKIP
    """
    b = _breakdown_table(data)
    table = b[["rank", "step"]].copy()
    for part in bd.PARTS:
        table[f"{part}_ms"] = b[f"{part}_ns"] / 1e6
    table["wall_ms"] = b["wall_ns"] / 1e6
    fig = _figure(max(4.0, 0.45 * len(table) + 2), 3.6)
    ax = fig.add_subplot()
    x = np.arange(len(table))
    bottom = np.zeros(len(table))
    for part in bd.PARTS:
        values = table[f"{part}_ms"].to_numpy()
        ax.bar(x, values, bottom=bottom, color=COLORS[part], label=PART_LABELS[part])
        bottom += values
    ax.set_xticks(
        x,
        [f"r{r} #{s}" for r, s in zip(table["rank"], table["step"], strict=True)],
        rotation=60,
        fontsize=8,
    )
    ax.set_ylabel("ms")
    ax.set_title(
        "step breakdown, compute first: comm under compute is hidden, comm alone is exposed\n"
        "(parts add up to the step's wall time)",
        fontsize=9,
    )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    return Plot(fig, table)


def plot_rank_heatmap(data: pd.DataFrame) -> Plot:
    """Rank x step heatmap of step time (ms); the table is ``rank_steps`` (straggler, spread).

    >>> from hpcprof_kit import traces                                      # doctest: +SKIP
    >>> fig, steps = traces.plot_rank_heatmap(traces.load("runs/x/traces")) # doctest: +SKIP
    """
    table = data if "straggler" in data.columns else bd.rank_steps(data)
    ranks = [c for c in table.columns if c not in ("straggler", "spread_ms", "spread_pct")]
    grid = table[ranks].to_numpy(dtype=float).T  # rows = ranks
    fig = _figure(max(4.0, 0.6 * grid.shape[1] + 2.5), max(2.2, 0.4 * grid.shape[0] + 1.2))
    ax = fig.add_subplot()
    image = ax.imshow(grid, aspect="auto", cmap="viridis")
    fig.colorbar(image, ax=ax, label="step time (ms)")
    ax.set_xticks(range(grid.shape[1]), [str(s) for s in table.index], fontsize=8)
    ax.set_yticks(range(grid.shape[0]), [f"rank {r}" for r in ranks], fontsize=8)
    ax.set_xlabel("step")
    if grid.size <= 200:  # numbers on the cells while they stay readable
        for (i, j), v in np.ndenumerate(grid):
            if not np.isnan(v):
                ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=7, color="w")
    ax.set_title("step time per rank (the straggler is the brightest cell of a column)", fontsize=9)
    return Plot(fig, table)


def plot_same_name(df: pd.DataFrame, name: str, bins: int = 30) -> Plot:
    """Distribution of the durations of every slice called ``name``, one histogram per rank.

    >>> from hpcprof_kit import traces                                        # doctest: +SKIP
    >>> fig, stats = traces.plot_same_name(traces.load("runs/x/traces"), "aten::mm")  # doctest: +SKIP
    """
    table = same_name(df, name)
    occ = table.attrs["occurrences"]
    fig = _figure(6.0, 3.2)
    ax = fig.add_subplot()
    us = occ["dur_ns"].to_numpy(dtype=float) / 1e3
    edges = np.histogram_bin_edges(us, bins=bins)
    for rank, group in occ.groupby("rank"):
        ax.hist(group["dur_ns"] / 1e3, bins=edges, histtype="step", label=f"rank {rank}")
    ax.axvline(table.loc["all", "median_us"], color="k", ls="--", lw=0.8, label="median")
    ax.set_xlabel("duration (µs)")
    ax.set_ylabel("occurrences")
    ax.set_title(f"{name}: {len(occ)} occurrences", fontsize=9)
    ax.legend(fontsize=8)
    return Plot(fig, table)
