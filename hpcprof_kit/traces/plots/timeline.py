"""The timeline: ranks x threads/streams x nesting levels over time, coloured by phase.

``plot_timeline`` draws each rank's threads and device streams as Perfetto does, one lane per
nesting level (:mod:`hpcprof_kit.traces.analyses.lanes`), so ``ProfilerStep#3`` > ``backward`` >
``DistributedDataParallel`` work > ``aten::`` ops read top to bottom, and the all-reduce on
its own thread lines up under the backward pass it overlaps. Names are written on the slices
wide enough to hold them. Nothing is hidden: slices under a pixel at their level are merged
into one bar and counted (``plot.table``: per lane; ``plot.bars``: per bar).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hpcprof_kit.errors import SpecError
from hpcprof_kit.traces.analyses import lanes as ln
from hpcprof_kit.traces.analyses.breakdown import STEP_PREFIX, require_table

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hpcprof_kit.traces.plots.figure import Plot

CHAR_PX = 6.0  # width of one character of a 7-point label at 100 dpi
MAX_LABELS = 600  # the widest bars get labels first; more text would only blur the picture
IDLE_MIN_PX = 3  # a gap in a lane group's top lane drawn as idle time


def select(df: pd.DataFrame, ranks=None, threads=None, tracks=None) -> pd.DataFrame:
    """The drawable rows of the chosen ranks, threads (tids) and tracks."""
    require_table(df, ("rank", "pid", "tid", "track", "cat", "name", "ts_ns", "dur_ns"))
    keep = ln.drawable(df)
    for column, chosen in (("rank", ranks), ("tid", threads), ("track", tracks)):
        if chosen is None:
            continue
        values = df[column].astype(str) if column != "rank" else df[column]
        wanted = [str(c) for c in chosen] if column != "rank" else list(chosen)
        keep &= values.isin(wanted).to_numpy()
        if not keep.any():
            known = sorted({str(v) for v in df[column].unique()})
            argument = {"rank": "ranks", "tid": "threads", "track": "tracks"}[column]
            raise SpecError(
                f"{argument}={list(chosen)!r} selects no events; pick from {known[:12]}"
            )
    return df[keep]


def step_window(df: pd.DataFrame, step) -> tuple[int, int]:
    """Start and end (ns) of ProfilerStep ``step`` (or steps ``(first, last)``) over the ranks."""
    first, last = (step, step) if np.isscalar(step) else tuple(step)
    names = [str(n) for n in df["name"].cat.categories]
    numbers = {i: int(n[len(STEP_PREFIX) :]) for i, n in enumerate(names)
               if n.startswith(STEP_PREFIX) and n[len(STEP_PREFIX) :].isdigit()}  # fmt: skip
    codes = [i for i, k in numbers.items() if first <= k <= last]
    rows = df[np.isin(df["name"].cat.codes.to_numpy(), codes)]
    if rows.empty:
        raise SpecError(
            f"step={step!r} is not in this trace; its steps are {sorted(set(numbers.values()))}"
        )
    ts = rows["ts_ns"].to_numpy()
    return int(ts.min()), int((ts + rows["dur_ns"].to_numpy()).max())


def timeline_bars(
    df: pd.DataFrame,
    t0: int,
    t1: int,
    origin: int,
    width_px: int = 1200,
    min_px: float = 1.0,
    max_depth: int = 8,
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The lanes table, the bars table and the row arrays behind a timeline of ``[t0, t1]``."""
    import pandas as pd

    group, groups = ln.thread_groups(df)
    ts = df["ts_ns"].to_numpy(dtype=np.int64)
    te = ts + df["dur_ns"].to_numpy(dtype=np.int64)
    depth = ln.slice_depths(group, ts, te)
    phase = ln.slice_phases(df, group, depth)
    vis = np.flatnonzero((te >= t0) & (ts <= t1))
    if not vis.size:
        raise SpecError("the window holds no slices; widen it or pick another step")
    npp = (t1 - t0) / width_px
    level = np.minimum(depth[vis], max_depth)
    lane_key = group[vis] * (max_depth + 1) + level
    s, e = np.clip(ts[vis], t0, t1), np.clip(te[vis], t0, t1)
    # slices of different phases never share a bar: a merged bar keeps one honest colour
    merge_key = lane_key * len(ln.PHASES) + phase[vis]
    bs, be, count, bar_of = ln.lod_lanes(merge_key, s, e, npp, min_px)
    dur = te[vis] - ts[vis]
    longest = np.lexsort((-dur, bar_of))[np.r_[0, np.cumsum(count)[:-1]]]  # one row per bar
    lead = vis[longest]
    bar_lane = lane_key[longest]
    lane_ids, lane_of_bar = np.unique(bar_lane, return_inverse=True)
    g_of_lane, d_of_lane = lane_ids // (max_depth + 1), lane_ids % (max_depth + 1)
    names = df["name"].cat.categories.astype(str).to_numpy()[df["name"].cat.codes.to_numpy()[lead]]
    bars = pd.DataFrame({
        "rank": groups["rank"].to_numpy()[g_of_lane][lane_of_bar],
        "lane": groups["lane"].to_numpy()[g_of_lane][lane_of_bar],
        "depth": d_of_lane[lane_of_bar],
        "y": lane_of_bar,
        "start_ms": (bs - origin) / 1e6,
        "end_ms": (be - origin) / 1e6,
        "events": count,
        "name": names,
        "phase": np.array(ln.PHASES)[phase[lead]],
        "lead_share": np.minimum(dur[longest] / np.maximum(be - bs, 1), 1.0),
    })  # fmt: skip
    bars["label"] = _labels(bars, npp)
    bars = pd.concat([bars, _idle(bars, npp)], ignore_index=True)
    bars = bars.sort_values(["y", "start_ms"], kind="stable", ignore_index=True)
    lanes = _lane_table(
        bars, depth[vis] > max_depth, lane_of_row=np.searchsorted(lane_ids, lane_key)
    )
    rows = {"vis": vis, "y": np.searchsorted(lane_ids, lane_key), "ts": ts, "phase": phase}
    return lanes, bars, rows


def _labels(bars: pd.DataFrame, npp: float) -> np.ndarray:
    """The text written on each bar: its name (cut with an ellipsis) where it fits, '#N' on steps."""
    px = (bars["end_ms"] - bars["start_ms"]).to_numpy() * 1e6 / npp
    out = np.full(len(bars), "", dtype=object)
    fit = (px >= 4 * CHAR_PX) & (bars["lead_share"].to_numpy() >= 0.8)
    widest = np.flatnonzero(fit)[np.argsort(-px[fit], kind="stable")][:MAX_LABELS]
    for i in widest:
        name = bars["name"].iat[i]
        if name.startswith(STEP_PREFIX):
            name = "#" + name[len(STEP_PREFIX) :]
        room = int((px[i] - 4) / CHAR_PX)
        out[i] = name if len(name) <= room else (name[: room - 1] + "…" if room >= 5 else "")
    return out


def _idle(bars: pd.DataFrame, npp: float) -> pd.DataFrame:
    """Time inside the rank's steps when a lane group's top lane (below the steps) runs nothing,
    in gaps of at least IDLE_MIN_PX pixels."""
    import pandas as pd

    is_step = bars["name"].str.startswith(STEP_PREFIX).to_numpy()
    steps = bars[is_step]
    pieces = []
    for _, group in bars[~is_step].groupby(["rank", "lane"], sort=False):
        top = group[group["depth"] == group["depth"].min()].sort_values("start_ms")
        a, b = top["start_ms"].to_numpy(), np.maximum.accumulate(top["end_ms"].to_numpy())
        mine = steps[steps["rank"] == top["rank"].iat[0]]
        spans = zip(mine["start_ms"], mine["end_ms"], strict=True) if len(mine) else [(a[0], b[-1])]
        for lo, hi in spans:
            inside = (b > lo) & (a < hi)
            edges = np.r_[lo, np.clip(np.column_stack([a[inside], b[inside]]).ravel(), lo, hi), hi]
            gap_a, gap_b = edges[0::2], edges[1::2]
            wide = (gap_b - gap_a) * 1e6 >= IDLE_MIN_PX * npp
            if wide.any():
                pieces.append(pd.DataFrame({"rank": top["rank"].iat[0], "lane": top["lane"].iat[0],
                                            "depth": top["depth"].iat[0], "y": top["y"].iat[0],
                                            "start_ms": gap_a[wide], "end_ms": gap_b[wide],
                                            "events": 0, "name": "idle", "phase": "idle",
                                            "lead_share": 1.0, "label": ""}))  # fmt: skip
    return pd.concat(pieces, ignore_index=True) if pieces else bars.iloc[:0]


def _lane_table(bars: pd.DataFrame, folded: np.ndarray, lane_of_row: np.ndarray) -> pd.DataFrame:
    work = bars[bars["phase"] != "idle"]
    g = work.groupby("y", sort=True)
    lanes = g.agg(rank=("rank", "first"), lane=("lane", "first"), depth=("depth", "first"),
                  events=("events", "sum"), bars=("events", "size"))  # fmt: skip
    lanes["merged"] = lanes["events"] - lanes["bars"]
    lanes["busy_ms"] = g.apply(
        lambda b: float((b["end_ms"] - b["start_ms"]).sum()), include_groups=False
    )
    lanes["folded"] = np.bincount(lane_of_row[folded], minlength=len(lanes))[: len(lanes)]
    return lanes.reset_index(drop=True)


def plot_timeline(
    df: pd.DataFrame,
    ranks: list[int] | None = None,
    threads: list | None = None,
    tracks: list[str] | None = None,
    *,
    start: float | None = None,
    end: float | None = None,
    step: int | tuple[int, int] | None = None,
    max_depth: int = 8,
    flows: bool = False,
    width_px: int = 1200,
    min_px: float = 1.0,
    start_ns: int | None = None,
    end_ns: int | None = None,
) -> Plot:
    """Each rank's threads and streams, one lane per nesting level, coloured by phase.

    Zoom with ``step=3`` (or ``step=(2, 3)``), or ``start``/``end`` in ms on the picture's
    axis (since the selection's first event; ``start_ns``/``end_ns`` take absolute times).
    ``ranks``, ``threads`` (tids) and ``tracks`` choose what to draw; levels below
    ``max_depth`` are drawn (and counted) in level ``max_depth``. ``flows=True`` adds thin
    lines from each kernel launch to its kernel and between the same collective on
    neighbouring ranks. ``plot.table`` has one row per lane (events, bars, merged, busy_ms,
    folded); ``plot.bars`` one row per bar drawn (its name, phase and the label written on it).

    >>> from hpcprof_kit import traces                                   # doctest: +SKIP
    >>> plot = traces.plot_timeline(traces.load("runs/x/traces"), step=3) # doctest: +SKIP
    >>> plot.bars.query("depth == 1")[["rank", "name", "phase"]]          # doctest: +SKIP
    """
    from hpcprof_kit.traces.plots.figure import Plot

    if width_px < 100:
        raise SpecError(f"width_px={width_px} is below 100 pixels; pass width_px=1200 or more")
    if not isinstance(max_depth, int) or max_depth < 0:
        raise SpecError(f"max_depth={max_depth!r} is not a level; pass 0 (top only) or more")
    sel = select(df, ranks, threads, tracks)
    if sel.empty:
        raise SpecError(
            f"ranks={ranks!r} selects no events; pick ranks from the table's 'rank' column"
        )
    ts = sel["ts_ns"].to_numpy(dtype=np.int64)
    origin = int(ts.min())
    t0, t1 = origin, int((ts + sel["dur_ns"].to_numpy(dtype=np.int64)).max())
    if step is not None:
        t0, t1 = step_window(sel, step)
    t0 = (
        int(start_ns)
        if start_ns is not None
        else origin + int(start * 1e6)
        if start is not None
        else t0
    )
    t1 = int(end_ns) if end_ns is not None else origin + int(end * 1e6) if end is not None else t1
    if t1 <= t0:
        raise SpecError(f"the window ends ({t1} ns) before it starts ({t0} ns); widen it")
    lanes, bars, rows = timeline_bars(sel, t0, t1, origin, width_px, min_px, max_depth)
    fig = _draw(lanes, bars, width_px, (t0 - origin) / 1e6, (t1 - origin) / 1e6)
    ax = fig.axes[0]
    table = lanes.drop(columns=[])
    table.attrs["bars"] = bars.drop(columns=["y", "lead_share"])
    if flows:
        table.attrs["flows"] = _draw_flows(ax, sel, rows, origin)
    folded = int(lanes["folded"].sum())
    ax.set_title(
        f"{int(lanes['events'].sum()):,} slices drawn as {int(lanes['bars'].sum()):,} bars in "
        f"{len(lanes)} lanes; {int(lanes['merged'].sum()):,} merged (under a pixel at their level; "
        f"min width {min_px:g} px)"
        + (f"; {folded:,} below level {max_depth} drawn in it" if folded else ""),
        fontsize=9,
    )
    return Plot(fig, table)


def _draw(lanes: pd.DataFrame, bars: pd.DataFrame, width_px: int, x0: float, x1: float):
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    from hpcprof_kit.traces.plots.figure import new_figure

    n = max(len(lanes), 1)
    fig = new_figure(width_px / 100, 1.2 + 0.2 * n)
    ax = fig.add_subplot()
    handles = []
    for phase, color in ln.PHASE_COLORS.items():
        mine = bars[bars["phase"] == phase]
        if mine.empty:
            continue
        a, b, y = mine["start_ms"].to_numpy(), mine["end_ms"].to_numpy(), mine["y"].to_numpy()
        verts = np.stack([np.column_stack(p) for p in ((a, y - 0.42), (a, y + 0.42), (b, y + 0.42), (b, y - 0.42))], axis=1)  # fmt: skip
        edge = "#cccccc" if phase == "idle" else "none"
        ax.add_collection(PolyCollection(verts, facecolors=color, edgecolors=edge, linewidths=0.3))
        handles.append(Patch(facecolor=color, edgecolor=edge, label=phase))
    labelled = bars[bars["label"] != ""]
    for a, b, y, text in zip(
        labelled["start_ms"], labelled["end_ms"], labelled["y"], labelled["label"], strict=True
    ):
        ax.text((a + b) / 2, y, text, ha="center", va="center", fontsize=7, clip_on=True)
    ticks = [f"rank {r} {lane} · {d}" if d == 0 else f"· {d}"
             for r, lane, d in zip(lanes["rank"], lanes["lane"], lanes["depth"], strict=True)]  # fmt: skip
    ax.set_yticks(range(len(lanes)), ticks, fontsize=7)
    first = np.flatnonzero(np.r_[True, (lanes["lane"].to_numpy()[1:] != lanes["lane"].to_numpy()[:-1]) | (lanes["rank"].to_numpy()[1:] != lanes["rank"].to_numpy()[:-1])])  # fmt: skip
    for y in first[1:]:
        ax.axhline(y - 0.5, color="#888888", lw=0.5)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlim(x0, x1)
    ax.set_xlabel("time since the first event (ms)")
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1, 1), title="phase")
    return fig


def _draw_flows(ax, df: pd.DataFrame, rows: dict, origin: int) -> pd.DataFrame:
    """Launch -> kernel (same rank and correlation id) and the same collective on neighbouring
    ranks (the k-th call of a name on each rank), as thin lines; returns their table."""
    import pandas as pd
    from matplotlib.collections import LineCollection

    vis, y = rows["vis"], rows["y"]
    sub = pd.DataFrame({"rank": df["rank"].to_numpy()[vis], "corr": df["corr"].to_numpy()[vis],
                        "device": df["device"].to_numpy()[vis], "name": df["name"].astype(str).to_numpy()[vis],
                        "comm": df["track"].astype(str).to_numpy()[vis] == "comm",
                        "ms": (rows["ts"][vis] - origin) / 1e6, "y": y})  # fmt: skip
    linked = sub[sub["corr"] >= 0]
    launch = linked[linked["device"] < 0].merge(
        linked[linked["device"] >= 0], on=["rank", "corr"], suffixes=("_from", "_to")
    )
    launch = launch.assign(
        kind="launch", rank_from=launch["rank"], rank_to=launch["rank"], name=launch["name_to"]
    )
    launch = launch.drop(columns=["rank"])
    coll = sub[sub["comm"]].sort_values("ms")
    coll = coll.assign(k=coll.groupby(["rank", "name"]).cumcount())
    ranks = sorted(coll["rank"].unique().tolist())
    pairs = [
        coll[coll["rank"] == r].merge(
            coll[coll["rank"] == q], on=["name", "k"], suffixes=("_from", "_to")
        )
        for r, q in zip(ranks[:-1], ranks[1:], strict=True)
    ]
    pair = pd.concat([launch.iloc[:0], *pairs], ignore_index=True).assign(kind="collective")
    cols = ["kind", "name", "rank_from", "ms_from", "y_from", "rank_to", "ms_to", "y_to"]
    flows = pd.concat([launch[cols], pair[cols]], ignore_index=True)
    segs = np.stack(
        [flows[["ms_from", "y_from"]].to_numpy(float), flows[["ms_to", "y_to"]].to_numpy(float)],
        axis=1,
    )
    colors = np.where(flows["kind"] == "launch", "#555555", ln.PHASE_COLORS["communication"])
    ax.add_collection(LineCollection(segs, colors=list(colors), linewidths=0.5, alpha=0.6))
    return flows
