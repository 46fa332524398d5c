"""Where each step's time went, per rank: step breakdown, comm/compute overlap, ranks side by side.

Every number comes from interval unions (``hpcprof_kit.traces.analyses.intervals``), so nested ops and
concurrent streams are never counted twice, and the parts of a step add up to its wall time.

What runs: *compute* is device kernels (device traces) or host ops outside communication, per
thread (CPU-only traces); *communication* is device comm kernels (NCCL, oneCCL, RCCL ...) on
device traces, gloo/c10d host work on CPU-only traces. Each instant of a step goes to one
part, compute first (the rule of :func:`step_breakdown`, its plot's legend and
:func:`comm_overlap`, which sums the same parts):

1. ``compute``      - compute runs, no communication at the same time;
2. ``hidden_comm``  - compute runs and communication too: communication hidden behind compute;
3. ``exposed_comm`` - communication runs, no compute: the step waits for it;
4. ``memory``       - device memory copies and sets, neither of the above;
5. ``host``         - host-only: CPU ops and runtime calls while the device does nothing;
6. ``idle``         - the rest of the step.

A step is the ``ProfilerStep#N`` span of its rank. A rank without ProfilerStep events gets one
pseudo step ``-1`` covering its whole trace, and the ``span`` column says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.errors import SpecError, TraceFormatError
from hpcprof_kit.traces.analyses import intervals as iv
from hpcprof_kit.traces.table.distinct import distinct

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

PARTS = ("compute", "hidden_comm", "exposed_comm", "memory", "host", "idle")
STEP_PREFIX = "ProfilerStep#"
WHOLE_TRACE = "whole trace (no ProfilerStep events)"
DEVICE_TRACKS = ("gpu", "memcpy", "memset")
# Spans that wrap everything on a thread: counting them as work would leave no idle time.
WRAPPER_CATS = ("Trace",)
# record_function ranges on the cpu track label time rather than do work: the ops inside them
# are the work, and a range around a wait is still a wait. (On the comm track they are the
# collectives themselves, e.g. gloo:all_reduce, and stay communication.)
RANGE_CAT = "user_annotation"


def require_table(df: pd.DataFrame, needed: tuple[str, ...] = ("rank", "track", "ts_ns")) -> None:
    """Raise TraceFormatError when ``df`` is not a trace table (see ``traces/table/schema.py``)."""
    missing = [c for c in needed if c not in getattr(df, "columns", ())]
    if missing:
        raise TraceFormatError(
            f"expected a trace table with columns {list(needed)}, but columns {missing} are "
            "missing; build it with hpcprof_kit.traces.load(path)"
        )


def bare(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` over the same columns without its ``attrs``.

    pandas deep-copies ``attrs`` into every frame and column derived from a frame, and a
    run's per-rank metadata grows with its ranks: an analysis that kept them paid that copy
    on every step of its work, which made it quadratic in the ranks.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"rank": [0]}); df.attrs["ranks"] = {0: {}}
    >>> bare(df).attrs, df.attrs
    ({}, {'ranks': {0: {}}})
    """
    import pandas as pd

    # a frame over the same columns starts without attrs; df.copy would deep-copy them first
    out = pd.DataFrame(df, copy=False)
    if out.attrs:  # pragma: no cover - a pandas that carries them over
        out.attrs = {}
    return out


def text_test(column: pd.Series, test) -> np.ndarray:
    """``test`` (a vectorised test of a text Series) over a column's text as a boolean array;
    a category column is tested once per label instead of once per row.

    >>> import pandas as pd
    >>> text_test(pd.Series(["ProfilerStep#1", "mm"], dtype="category"), lambda s: s == "mm")
    array([False,  True])
    """
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        labels = pd.Series([*column.cat.categories.astype(str), None], dtype=str)
        hit = test(labels).to_numpy(dtype=bool)
        codes = column.cat.codes.to_numpy()
        said = np.flatnonzero(hit)
        if said.size <= 4:  # a few labels: compared code by code, cheaper than a gather
            out = np.zeros(codes.size, dtype=bool)
            for k in said.tolist():  # the last slot is a missing label, code -1
                out |= codes == (-1 if k == hit.size - 1 else k)
            return out
        return hit[codes]  # code -1 (missing) takes the last slot
    return test(column.astype(str)).to_numpy(dtype=bool)


def _is_step(names: pd.Series) -> np.ndarray:
    return text_test(names, lambda s: s.str.startswith(STEP_PREFIX))


def _in(column: pd.Series, values: tuple[str, ...]) -> np.ndarray:
    return text_test(column, lambda s: s.isin(values))


def rank_groups(rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows grouped by rank once: ``(order, ranks, bounds)`` where ``order`` sorts the rows by
    rank (keeping their order within a rank) and rank ``ranks[i]`` is rows
    ``order[bounds[i]:bounds[i + 1]]``.

    >>> order, ranks, bounds = rank_groups(np.array([1, 0, 1, 0]))
    >>> order.tolist(), ranks.tolist(), bounds.tolist()
    ([1, 3, 0, 2], [0, 1], [0, 2, 4])
    """
    order = np.argsort(rank, kind="stable")
    ranked = rank[order]
    cuts = np.flatnonzero(ranked[1:] != ranked[:-1]) + 1
    bounds = np.concatenate([[0], cuts, [ranked.size]] if ranked.size else [[0]]).astype(np.int64)
    return order, ranked[bounds[:-1]], bounds


def step_spans(df: pd.DataFrame) -> pd.DataFrame:
    """One row per rank and step: ``rank, step, start_ns, end_ns, wall_ns, span``.

    >>> from hpcprof_kit.traces import load            # doctest: +SKIP
    >>> step_spans(load("runs/x/traces"))              # doctest: +SKIP
    """
    import pandas as pd

    require_table(df)
    df = bare(df)
    rank = df["rank"].to_numpy()
    ts = df["ts_ns"].to_numpy(dtype=np.int64)
    dur = df["dur_ns"].to_numpy(dtype=np.int64)
    # the host's ProfilerStep spans; GPU traces repeat them as gpu_user_annotation, not a step
    is_step = _is_step(df["name"]) & _in(df["track"], ("cpu",)) & (dur > 0)
    rows = np.flatnonzero(is_step)
    rows = rows[np.argsort(rank[rows], kind="stable")]  # by rank, trace order within one
    names = df["name"].iloc[rows].astype(str)
    numbers = names.str.slice(len(STEP_PREFIX)).astype(int).to_numpy(dtype=np.int64)
    # ranks without ProfilerStep events: one pseudo step over the whole trace
    order, ranks, bounds = rank_groups(rank)
    stepless = ~np.isin(ranks, rank[rows])
    end = (ts + dur)[order]
    lo = np.minimum.reduceat(ts[order], bounds[:-1])[stepless] if ranks.size else ranks
    hi = np.maximum.reduceat(end, bounds[:-1])[stepless] if ranks.size else ranks
    if rows.size + lo.size == 0:
        return pd.DataFrame([], columns=["rank", "step", "start_ns", "end_ns", "wall_ns", "span"])
    out = pd.DataFrame(
        {
            "rank": np.concatenate([rank[rows], ranks[stepless]]).astype(np.int64),
            "step": np.concatenate([numbers, np.full(lo.size, -1, dtype=np.int64)]),
            "start_ns": np.concatenate([ts[rows], lo]).astype(np.int64),
            "end_ns": np.concatenate([ts[rows] + dur[rows], hi]).astype(np.int64),
            "wall_ns": np.concatenate([dur[rows], hi - lo]).astype(np.int64),
            "span": ["ProfilerStep"] * rows.size + [WHOLE_TRACE] * int(lo.size),
        }
    )
    # a step exported twice (repeat cycles, duplicated files) keeps its longest span
    out = out.iloc[np.argsort(out["rank"].to_numpy(), kind="stable")].reset_index(drop=True)
    out = out.sort_values(["rank", "step", "wall_ns"]).drop_duplicates(
        ["rank", "step"], keep="last"
    )
    return out.reset_index(drop=True)


def _event_columns(df: pd.DataFrame, threads: bool = True) -> dict[str, np.ndarray]:
    """The per-event arrays the interval sets are made of, computed once for the whole table
    (with each row's thread, :func:`_threads`, unless ``threads`` is False)."""
    track = df["track"]
    device = df["device"].to_numpy() if "device" in df else np.full(len(df), -1)
    is_comm = _in(track, ("comm",))
    on_device = _in(track, DEVICE_TRACKS) | (is_comm & (device >= 0))
    label = _in(df["cat"], (RANGE_CAT,)) & _in(track, ("cpu",))
    wrapper = _is_step(df["name"]) | _in(df["cat"], WRAPPER_CATS) | label
    host = _in(track, ("cpu", "runtime", "comm")) & ~on_device & ~wrapper
    start = df["ts_ns"].to_numpy(dtype=np.int64)
    cols = {
        "start": start,
        "end": start + df["dur_ns"].to_numpy(dtype=np.int64),
        "on_device": on_device,
        "device_comm": is_comm & on_device,
        "gpu": _in(track, ("gpu",)),
        "memory": _in(track, ("memcpy", "memset")),
        "host": host,
        "host_comm": host & is_comm,
    }
    # host collectives that block until the data has moved: gloo's and MPI's own ranges (a
    # device rank whose collectives run on the host), not the enqueues every backend records
    # (c10d::allreduce_, record_param_comms) nor a device library's (nccl:, xccl:)
    rows = np.flatnonzero(cols["host_comm"])
    blocking = df["name"].iloc[rows].astype(str).str.match(r"(?:gloo|mpi):")
    cols["host_blocking_comm"] = np.zeros(len(df), dtype=bool)
    cols["host_blocking_comm"][rows[blocking.to_numpy(dtype=bool)]] = True
    if threads:
        cols["thread"] = _threads(df)
    return cols


def _threads(df: pd.DataFrame) -> np.ndarray:
    """Each row's thread as a number: CPU-only ranks split their host work by thread; a row
    without pid or tid (code -1) has no thread, and like a pandas groupby the split leaves
    it out (-1)."""
    import pandas as pd

    pid, tid = (pd.factorize(df[c])[0].astype(np.int64) for c in ("pid", "tid"))
    thread = pid * (int(tid.max(initial=0)) + 1) + tid
    return np.where((pid < 0) | (tid < 0), -1, thread)


def _sets(c: dict[str, np.ndarray]) -> tuple[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The busy-interval sets of one rank's event arrays (see :func:`rank_sets`)."""
    empty = np.array([], dtype=np.int64)

    def spans(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return iv.union(c["start"][mask], c["end"][mask])

    if c["on_device"].any():
        # no collective on the device (gloo or MPI on a GPU): the host's blocking ones are it
        comm = c["device_comm"] if c["device_comm"].any() else c["host_blocking_comm"]
        sets = {
            "comm": spans(comm),
            "compute": spans(c["gpu"]),
            "memory": spans(c["memory"]),
            "host": spans(c["host"]),
        }
        return "device", sets
    host = c["host"]
    # per thread: an op that waits on a collective it wraps is not computing meanwhile
    thread, start, end = c["thread"][host], c["start"][host], c["end"][host]
    is_comm = c["host_comm"][host]
    order = np.argsort(thread, kind="stable")
    order = order[thread[order] >= 0]
    cuts = np.flatnonzero(np.diff(thread[order])) + 1
    work = []
    for rows in np.split(order, cuts) if order.size else []:
        comm = is_comm[rows]
        busy = iv.union(start[rows][~comm], end[rows][~comm])
        work.append(iv.subtract(busy, iv.union(start[rows][comm], end[rows][comm])))
    sets = {"comm": spans(c["host_comm"]), "compute": iv.union_of(*work)}
    sets["memory"] = sets["host"] = (empty, empty)
    return "cpu", sets


def rank_sets(sub: pd.DataFrame) -> tuple[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The busy-interval sets of one rank: ``comm``, ``compute``, ``memory``, ``host``.

    Returns ``(kind, sets)`` where kind is ``"device"`` when the rank has device events and
    ``"cpu"`` otherwise.
    """
    return _sets(_event_columns(bare(sub)))


def _layers(sets: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """Cumulative unions, compute first: compute, +comm, +memory, +host."""
    layers = [sets["compute"]]
    for part in ("comm", "memory", "host"):
        layers.append(iv.union_of(layers[-1], sets[part]))
    return layers


def _parts(sets: dict, layers: list, start: np.ndarray, end: np.ndarray) -> list[np.ndarray]:
    """The six parts of each window ``[start, end)``, in ``PARTS`` order (they sum to its
    length)."""
    covered = [iv.measure_each(*layer, start, end) for layer in layers]
    comm = iv.measure_each(*sets["comm"], start, end)
    exposed = covered[1] - covered[0]  # comm where no compute runs
    hidden = comm - exposed
    return [
        covered[0] - hidden,
        hidden,
        exposed,
        covered[2] - covered[1],
        covered[3] - covered[2],
        end - start - covered[3],
    ]


def step_breakdown(df: pd.DataFrame) -> pd.DataFrame:
    """Per rank and step: wall time split into the six parts of ``PARTS`` (ns).

    The rule, compute first: each instant of the step goes to ``compute`` when compute runs
    alone, to ``hidden_comm`` when compute and communication run together, to
    ``exposed_comm`` when communication runs without compute, else to ``memory`` (copies,
    sets), ``host`` (CPU ops and runtime calls while the device does nothing) or ``idle``.
    So ``compute_ns + hidden_comm_ns`` is all the time compute ran, ``hidden_comm_ns +
    exposed_comm_ns`` all the time communication ran, and only ``exposed_comm_ns`` is
    communication the step waited for. The parts add up exactly to ``wall_ns``; summed per
    rank they are :func:`comm_overlap`'s numbers. ``kind`` says whether the rank's trace has
    device events (``device``) or is a CPU-only trace (``cpu``).

    >>> from hpcprof_kit import traces                       # doctest: +SKIP
    >>> bd = traces.step_breakdown(traces.load("runs/x"))    # doctest: +SKIP
    >>> bd[["rank", "step", "compute_ns", "exposed_comm_ns", "idle_ns"]]  # doctest: +SKIP
    """
    import pandas as pd

    df = bare(df)
    spans = step_spans(df)
    cols = ["rank", "step", "start_ns", "wall_ns", *(f"{p}_ns" for p in PARTS), "kind", "span"]
    if spans.empty:
        return pd.DataFrame([], columns=cols)
    events = _event_columns(df, threads=False)
    rank = df["rank"].to_numpy()
    ranks = distinct(rank).astype(np.int64)
    span_rank = spans["rank"].to_numpy()
    first = np.searchsorted(span_rank, ranks, side="left")
    last = np.searchsorted(span_rank, ranks, side="right")
    start = spans["start_ns"].to_numpy(dtype=np.int64)
    end = spans["end_ns"].to_numpy(dtype=np.int64)
    parts = np.zeros((len(PARTS), len(spans)), dtype=np.int64)
    kinds = np.empty(len(spans), dtype=object)
    on_device = np.isin(ranks, distinct(rank[events["on_device"]]))
    windows = np.repeat(on_device, last - first)  # spans are sorted by rank, as ranks are
    if on_device.any():  # the ranks with device events at once, each in its block of time
        base = min(int(events["start"].min()), int(start.min()))
        span = max(int(events["end"].max()), int(end.max())) - base + 1
        device_comm = np.isin(ranks, distinct(rank[events["device_comm"]]))
        w_shift = (np.searchsorted(ranks, span_rank) * span - base)[windows]

        def spans_of(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            rows = np.flatnonzero(mask)
            at = np.searchsorted(ranks, rank[rows])
            rows, at = rows[on_device[at]], at[on_device[at]]
            shift = at * span - base
            return iv.union(events["start"][rows] + shift, events["end"][rows] + shift)

        # no collective on the device (gloo or MPI on a GPU): the host's blocking ones are it
        comm = events["device_comm"] | (events["host_blocking_comm"] & ~np.isin(
            rank, ranks[device_comm]))  # fmt: skip
        sets = {"comm": spans_of(comm), "compute": spans_of(events["gpu"]),
                "memory": spans_of(events["memory"]), "host": spans_of(events["host"])}  # fmt: skip
        got = _parts(sets, _layers(sets), start[windows] + w_shift, end[windows] + w_shift)
        parts[:, windows] = np.array(got)
        kinds[windows] = "device"
    if not on_device.all():  # CPU-only ranks: their threads one by one
        events["thread"] = _threads(df)
        order, _, bounds = rank_groups(rank)
        for i in np.flatnonzero(~on_device):
            rows = order[bounds[i] : bounds[i + 1]]
            kind, sets = _sets({k: v[rows] for k, v in events.items()})
            a, b = first[i], last[i]
            parts[:, a:b] = _parts(sets, _layers(sets), start[a:b], end[a:b])
            kinds[a:b] = kind
    out = pd.DataFrame({c: spans[c] for c in ("rank", "step", "start_ns", "wall_ns")})
    for p, values in zip(PARTS, parts, strict=True):
        out[f"{p}_ns"] = values
    out["kind"] = pd.Series(kinds, dtype=str)
    out["span"] = spans["span"]
    return out


def comm_overlap(data: pd.DataFrame) -> pd.DataFrame:
    """Per rank: communication time, how much of it hides behind compute, and what is exposed.

    ``data`` is a trace table or a :func:`step_breakdown` result; the numbers are that
    breakdown's parts summed over the rank's steps, so the two always agree:
    ``comm_ns`` = hidden_comm + exposed_comm, ``hidden_ns`` = hidden_comm, ``exposed_ns`` =
    exposed_comm, ``compute_ns`` = compute + hidden_comm (all the time compute ran), and
    ``overlap_ratio`` = hidden / comm (NaN when the rank does not communicate).

    >>> from hpcprof_kit import traces                       # doctest: +SKIP
    >>> traces.comm_overlap(traces.load("runs/x"))           # doctest: +SKIP
    """
    import pandas as pd

    bd = bare(data) if "exposed_comm_ns" in data.columns else step_breakdown(data)
    cols = ["rank", "kind", "comm_ns", "hidden_ns", "exposed_ns", "compute_ns", "overlap_ratio"]
    if bd.empty:
        return pd.DataFrame([], columns=cols)
    g = bd.groupby("rank", sort=True)
    hidden = g["hidden_comm_ns"].sum().astype(np.int64)
    exposed = g["exposed_comm_ns"].sum().astype(np.int64)
    comm = hidden + exposed
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(comm != 0, hidden / comm.where(comm != 0, 1), np.nan)
    out = {
        "rank": hidden.index.to_numpy().astype(np.int64),
        "kind": g["kind"].first().to_numpy(),
        "comm_ns": comm.to_numpy(),
        "hidden_ns": hidden.to_numpy(),
        "exposed_ns": exposed.to_numpy(),
        "compute_ns": g["compute_ns"].sum().astype(np.int64).to_numpy() + hidden.to_numpy(),
        "overlap_ratio": ratio.astype(float),
    }
    return pd.DataFrame(out, columns=cols)


# A step's straggler must lead the next rank by more than this share of the step's median
# busy time (and by TIE_MIN_NS); closer than that the ranks are named together as a tie.
TIE_SHARE = 0.01
TIE_MIN_NS = 10_000
STEP_VALUES = ("busy", "wall", "wait")
SUMMARY_COLUMNS = ("straggler", "tied", "cost_ms", "spread_ms", "spread_pct")


def busy_and_wait(b: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a :func:`step_breakdown` table: the time the rank worked before it waited
    (``wall - exposed_comm``) and the time it waited for communication (``exposed_comm``), ns.
    """
    wall = b["wall_ns"].to_numpy(dtype=np.int64)
    wait = b["exposed_comm_ns"].to_numpy(dtype=np.int64)
    return wall - wait, wait


def step_stragglers(
    ranks: np.ndarray, busy: np.ndarray, wait: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Per row of ``busy`` (steps x ranks, ns, NaN where a rank lacks the step): the straggler
    (-1 on a tie or an empty row), the ranks tied with the slowest (text, ``""`` when there is
    one straggler) and the straggler's cost (ns). With ``wait`` (the same grid of exposed
    communication) the cost is what the others measured: the median over the other ranks of
    their wait beyond the straggler's own (its wait is the transfer every rank waits for);
    without it, or on a tie, how much longer the slowest worked than the median rank.

    >>> s = step_stragglers(np.array([0, 1, 2]), np.array([[10e6, 16e6, 10e6], [5e6, 5e6, 4e6]]))
    >>> s["straggler"].tolist(), s["tied"].tolist(), s["cost_ns"].tolist()
    ([1, -1], ['', '0,1'], [6000000.0, 0.0])
    >>> waits = np.array([[7e6, 0.5e6, 6.5e6], [1e6, 1e6, 2e6]])
    >>> step_stragglers(np.array([0, 1, 2]), np.array([[9e6, 16e6, 10e6], [5e6, 5e6, 4e6]]),
    ...                 waits)["cost_ns"].tolist()
    [6250000.0, 0.0]
    """
    rows = busy.shape[0]
    straggler = np.full(rows, -1, dtype=np.int64)
    tied = np.full(rows, "", dtype=object)
    cost = np.full(rows, np.nan)
    for i in range(rows):
        row = busy[i]
        ok = ~np.isnan(row)
        if not ok.any():
            continue
        top = row[ok].max()
        median = float(np.median(row[ok]))
        close = ok & (row >= top - max(TIE_SHARE * median, TIE_MIN_NS))
        cost[i] = top - median
        if wait is not None and close.sum() == 1 and ok.sum() > 1:
            slowest = int(np.flatnonzero(close)[0])
            others = ok.copy()
            others[slowest] = False
            beyond = wait[i][others] - wait[i][slowest]
            cost[i] = max(0.0, float(np.median(beyond)))
        if close.sum() == 1:
            straggler[i] = int(ranks[close][0])
        else:
            tied[i] = ",".join(str(int(r)) for r in ranks[close])
    return {"straggler": straggler, "tied": tied, "cost_ns": cost}


def rank_steps(df: pd.DataFrame, value: str = "busy") -> pd.DataFrame:
    """Per step (rows) x rank (columns), in ms, the time each rank **worked** in the step
    before it waited for communication (``value="busy"``: wall - exposed comm; the default),
    its step wall time (``"wall"``) or the time it waited (``"wait"``: exposed comm); then
    the straggler and the spread.

    In synchronous training every rank's step ends together: the others wait in the
    collective for the last one to arrive, so wall times are alike and cannot show a
    straggler. The straggler is the rank that works longest before the collective (and so
    waits least); its ``busy`` is the brightest cell of the heatmap. Columns after the ranks:

    - ``straggler``: that rank, or -1 when two or more ranks are within 1 % of the step's
      median busy time (at least 10 µs) of the longest: then ``tied`` names them (``"0,3"``);
    - ``cost_ms``: what the straggler cost the others in this step, as they measured it:
      the median over the other ranks of their wait beyond the straggler's own wait (its
      own is the transfer, which every rank waits for);
    - ``spread_ms``, ``spread_pct``: the largest minus the smallest value of the row, and
      that relative to the row's median.

    ``df`` is a trace table or a :func:`step_breakdown` result; ``attrs["value"]`` says which
    value the rank columns hold.

    >>> from hpcprof_kit import traces                       # doctest: +SKIP
    >>> traces.rank_steps(traces.load("runs/x/traces"))      # doctest: +SKIP
    """
    import pandas as pd

    if value not in STEP_VALUES:
        raise SpecError(f"value={value!r} is not a step value; pick one of {STEP_VALUES}")
    b = bare(df) if "exposed_comm_ns" in getattr(df, "columns", ()) else step_breakdown(df)
    busy, wait = busy_and_wait(b)
    shown = {"busy": busy, "wall": b["wall_ns"].to_numpy(dtype=np.int64), "wait": wait}[value]
    cells = pd.DataFrame({"rank": b["rank"], "step": b["step"], "busy": busy, "shown": shown})
    table = cells.pivot(index="step", columns="rank", values="shown") / 1e6
    table.columns.name = "rank"
    ranks = np.asarray(table.columns, dtype=np.int64)
    cells["wait"] = wait
    grid = cells.pivot(index="step", columns="rank", values="busy").to_numpy(dtype=float)
    waits = cells.pivot(index="step", columns="rank", values="wait").to_numpy(dtype=float)
    s = step_stragglers(ranks, grid, waits)
    times = table.to_numpy(dtype=float)
    spread = np.nanmax(times, axis=1, initial=-np.inf) - np.nanmin(times, axis=1, initial=np.inf)
    out = table.copy()
    out["straggler"] = s["straggler"]
    out["tied"] = s["tied"].astype(str)
    out["cost_ms"] = s["cost_ns"] / 1e6
    out["spread_ms"] = spread
    with np.errstate(divide="ignore", invalid="ignore"):
        out["spread_pct"] = 100 * spread / np.nanmedian(times, axis=1)
    out.attrs["value"] = value
    return out
