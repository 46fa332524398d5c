"""Depth lanes: which slice sits at which nesting level of which thread or stream, and its phase.

A trace draws as Perfetto draws it: one lane *group* per rank and thread (host) or device
stream / queue (device; Kineto writes those as pid = device, tid = stream), and inside a group
one lane per nesting level: ``ProfilerStep#3`` at level 0, ``forward`` at 1, modules at 2, ops
below. Each slice gets a *phase* (forward, backward, optimizer, data loading, communication,
memory copy) from its own name or track, else from its closest ancestor that has one, else
(device kernels) from the host call that launched it (same correlation id).

Level of detail (:func:`lod_bars`) merges, lane by lane, only slices under a pixel wide at
their own level, and counts what it merges: the bars' counts add up to the slices drawn.

>>> import numpy as np
>>> slice_depths(np.array([0, 0, 0]), np.array([0, 1, 5]), np.array([10, 4, 9])).tolist()
[0, 1, 1]
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.analyses.breakdown import STEP_PREFIX, WRAPPER_CATS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# phase -> colour, in legend order. "step" is the ProfilerStep span itself; "other" is work
# under a step outside every named phase; "idle" is a gap in a lane group's top lane.
PHASE_COLORS: dict[str, str] = {
    "forward": "#4c72b0",
    "backward": "#55a868",
    "optimizer": "#8172b2",
    "data loading": "#ccb974",
    "communication": "#c44e52",
    "memory copy": "#dd8452",
    "step": "#b8b8b8",
    "other": "#9fb3c8",
    "idle": "#f2f2f2",
}
PHASES = tuple(PHASE_COLORS)
# Phase by track first (a collective is communication wherever it runs) ...
TRACK_PHASES = {"comm": "communication", "memcpy": "memory copy", "memset": "memory copy"}
# ... then by name, first match wins: record_function ranges (the kit's train app, HTA's
# "## forward ##" convention), torch's own ranges (DDP, Optimizer.step#Adam.step, DataLoader),
# autograd's backward functions.
NAME_PHASES: list[tuple[str, str]] = [
    ("data loading", r"^enumerate\(DataLoader\)|^## data_?load"),
    ("optimizer", r"^optimizer$|^## optimizer ##|^Optimizer\."),
    ("backward", r"^backward$|^## backward ##|^autograd::engine::evaluate_function"),
    ("backward", r"^[A-Z]\w*Backward\d*$|^torch::autograd::"),
    ("forward", r"^forward$|^## forward ##|\.forward$|^nn\.Module: "),
    ("memory copy", r"^(cuda|hip|ze|zeCommandList\w*)Memcpy|^Memcpy|^Memset"),
]
NONE = -1


def thread_groups(df: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Each row's lane group (rank, pid, tid) and the groups' table: rank, lane, device, events.

    Groups are numbered rank by rank: host threads first (the one recording the steps, then
    the busiest), then device streams.
    """
    import pandas as pd

    rank = df["rank"].to_numpy(dtype=np.int64)
    pid = df["pid"].cat.codes.to_numpy(dtype=np.int64)
    tid = df["tid"].cat.codes.to_numpy(dtype=np.int64)
    n_tid = len(df["tid"].cat.categories) + 1
    key = (rank * (len(df["pid"].cat.categories) + 1) + pid) * n_tid + tid
    uniq, first, inverse, counts = np.unique(
        key, return_index=True, return_inverse=True, return_counts=True
    )
    device = df["device"].to_numpy()
    stream = df["stream"].to_numpy()
    # a group is a device stream when any of its rows ran on a device
    on_device = np.zeros(uniq.size, dtype=bool)
    np.logical_or.at(on_device, inverse, device >= 0)
    dev_of = np.full(uniq.size, -1, dtype=np.int64)
    dev_of[inverse[device >= 0]] = device[device >= 0]
    tid_names = df["tid"].cat.categories.astype(str).to_numpy()
    tids = tid_names[df["tid"].cat.codes.to_numpy()[first]]  # one row per group: cheap
    labels = [
        f"dev {d} stream {stream[f] if stream[f] >= 0 else t}" if dev else f"thread {t}"
        for d, dev, t, f in zip(dev_of, on_device, tids, first, strict=True)
    ]
    groups = pd.DataFrame(
        {"rank": rank[first], "lane": labels, "tid": tids, "device": dev_of, "events": counts}
    )
    names = [str(n) for n in df["name"].cat.categories]
    step_codes = [i for i, n in enumerate(names) if n.startswith(STEP_PREFIX)]
    has_step = np.zeros(uniq.size, dtype=bool)
    np.logical_or.at(has_step, inverse, np.isin(df["name"].cat.codes.to_numpy(), step_codes))
    order = np.lexsort((-counts, ~has_step, on_device, rank[first]))
    renumber = np.empty(uniq.size, dtype=np.int64)
    renumber[order] = np.arange(uniq.size)
    return renumber[inverse], groups.iloc[order].reset_index(drop=True)


def slice_depths(group: np.ndarray, ts: np.ndarray, te: np.ndarray) -> np.ndarray:
    """Nesting level of each slice within its group: how many slices of the group are still
    open when it starts (ties: the longer one is the parent), computed without a Python loop.

    A slice starting exactly where another ends is its sibling, not its child.

    >>> slice_depths(np.array([0, 0, 1]), np.array([0, 10, 0]), np.array([10, 20, 5])).tolist()
    [0, 0, 0]
    """
    te = np.maximum(te, ts + 1)  # an instant-long slice still occupies its start
    order = np.lexsort((-(te - ts), ts, group))
    g, s, e = group[order], ts[order], te[order]
    bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True])
    depth = np.empty(order.size, dtype=np.int64)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        closed = np.searchsorted(np.sort(e[a:b]), s[a:b], side="right")
        depth[a:b] = np.arange(b - a) - closed
    out = np.empty_like(depth)
    out[order] = np.maximum(depth, 0)
    return out


def name_phases(names: list[str]) -> np.ndarray:
    """Phase code (index into :data:`PHASES`, or -1) of each distinct name, by :data:`NAME_PHASES`.

    >>> [PHASES[c] for c in name_phases(["## forward ##", "Optimizer.step#Adam.step"])]
    ['forward', 'optimizer']
    """
    rules = [(PHASES.index(p), re.compile(rx)) for p, rx in NAME_PHASES]
    out = np.full(len(names), NONE, dtype=np.int8)
    for i, name in enumerate(names):
        if name.startswith(STEP_PREFIX):
            out[i] = PHASES.index("step")
            continue
        out[i] = next((code for code, rx in rules if rx.search(name)), NONE)
    return out


def slice_phases(df: pd.DataFrame, group: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Phase code of every row: its own (track, then name), else its closest ancestor's, else
    its launcher's (device rows, by correlation id), else ``other``."""
    tracks = [str(t) for t in df["track"].cat.categories]
    by_track = np.array([PHASES.index(TRACK_PHASES[t]) if t in TRACK_PHASES else NONE
                         for t in tracks] or [NONE], dtype=np.int8)  # fmt: skip
    own = by_track[df["track"].cat.codes.to_numpy()]
    by_name = name_phases([str(n) for n in df["name"].cat.categories])
    named = by_name[df["name"].cat.codes.to_numpy()]
    own = np.where(own == NONE, named, own)
    step = PHASES.index("step")
    inherit = np.where(own == step, NONE, own)  # a step's children are not "step"
    order = np.lexsort((depth, -df["dur_ns"].to_numpy(), df["ts_ns"].to_numpy(), group))
    d_ord, g_ord = depth[order], group[order]
    for d in range(1, int(depth.max(initial=0)) + 1):
        here, above = np.flatnonzero(d_ord == d), np.flatnonzero(d_ord == d - 1)
        if not here.size or not above.size:
            continue
        parent = above[np.maximum(np.searchsorted(above, here) - 1, 0)]
        ok = (g_ord[parent] == g_ord[here]) & (inherit[order[here]] == NONE)
        inherit[order[here[ok]]] = inherit[order[parent[ok]]]
    _by_launcher(df, inherit)
    phase = np.where(own == NONE, inherit, own)
    return np.where(phase == NONE, PHASES.index("other"), phase).astype(np.int8)


def _by_launcher(df: pd.DataFrame, inherit: np.ndarray) -> None:
    """Device rows without a phase take their host launcher's (same rank and correlation id)."""
    corr = df["corr"].to_numpy()
    device = df["device"].to_numpy()
    key = df["rank"].to_numpy(dtype=np.int64) * (1 << 40) + corr
    host = np.flatnonzero((corr >= 0) & (device < 0) & (inherit != NONE))
    need = np.flatnonzero((corr >= 0) & (device >= 0) & (inherit == NONE))
    if not host.size or not need.size:
        return
    host = host[np.argsort(key[host], kind="stable")]
    at = np.minimum(np.searchsorted(key[host], key[need]), host.size - 1)
    hit = key[host[at]] == key[need]
    inherit[need[hit]] = inherit[host[at[hit]]]


def drawable(df: pd.DataFrame) -> np.ndarray:
    """Rows a timeline draws: not instants, not the profiler's whole-trace wrapper span."""
    tracks = [str(t) for t in df["track"].cat.categories]
    cats = [str(c) for c in df["cat"].cat.categories]
    track_ok = np.array([t != "instant" for t in tracks] or [True])
    cat_ok = np.array([c not in WRAPPER_CATS for c in cats] or [True])
    return track_ok[df["track"].cat.codes.to_numpy()] & cat_ok[df["cat"].cat.codes.to_numpy()]


def lod_bars(
    start: np.ndarray, end: np.ndarray, t0: int, ns_per_px: float, min_px: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Level of detail for one lane: merge slices under a pixel wide, never drop one.

    A slice narrower than ``min_px`` pixels is widened to it; a slice that starts before the
    (widened) ones before it end joins their bar. Two wide slices a sub-pixel gap apart stay
    two bars. Returns bar starts and ends (ns) and how many slices each bar holds.

    >>> s, e, n = lod_bars(np.array([0, 1, 50]), np.array([1, 2, 60]), 0, ns_per_px=10)
    >>> s.tolist(), e.tolist(), n.tolist()
    ([0, 50], [11, 60], [2, 1])
    """
    lane = np.zeros(start.size, dtype=np.int64)
    s, e, n, _bar_of = lod_lanes(lane, start, end, ns_per_px, min_px)
    return s, e, n


def lod_lanes(
    lane: np.ndarray, start: np.ndarray, end: np.ndarray, ns_per_px: float, min_px: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`lod_bars` over many lanes at once, without a loop over lanes.

    Returns bar starts, ends and counts (bars ordered by lane, then start) and each row's bar.
    """
    if start.size == 0:
        empty = np.array([], dtype=np.int64)
        return empty, empty, empty, empty
    order = np.lexsort((start, lane))
    ln, s = lane[order], start[order].astype(np.int64)
    ln = np.r_[0, np.cumsum(ln[1:] != ln[:-1])]  # dense lane numbers keep the shift small
    width = int(np.ceil(min_px * ns_per_px))
    e = end[order].astype(np.int64)
    e = np.where(e - s < width, s + width, e)
    # one running maximum over all lanes: shift each lane past the one before it
    base = int(s.min())
    span = int(e.max()) - base + 1
    reach = np.maximum.accumulate((e - base) + ln * span) - ln * span + base
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = (ln[1:] != ln[:-1]) | (s[1:] >= reach[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    bar_of = np.empty(s.size, dtype=np.int64)
    bar_of[order] = np.cumsum(new) - 1
    return s[first], reach[last], last - first + 1, bar_of
