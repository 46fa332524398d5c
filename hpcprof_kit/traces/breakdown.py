"""Where each step's time went, per rank: step breakdown, comm/compute overlap, ranks side by side.

Every number comes from interval unions (``hpcprof_kit.traces.intervals``), so nested ops and
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

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces import intervals as iv

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
    """Raise TraceFormatError when ``df`` is not a trace table (see ``traces/schema.py``)."""
    missing = [c for c in needed if c not in getattr(df, "columns", ())]
    if missing:
        raise TraceFormatError(
            f"expected a trace table with columns {list(needed)}, but columns {missing} are "
            "missing; build it with hpcprof_kit.traces.load(path)"
        )


def _is_step(names: pd.Series) -> np.ndarray:
    return names.astype(str).str.startswith(STEP_PREFIX).to_numpy()


def step_spans(df: pd.DataFrame) -> pd.DataFrame:
    """One row per rank and step: ``rank, step, start_ns, end_ns, wall_ns, span``.

    >>> from hpcprof_kit.traces import load            # doctest: +SKIP
    >>> step_spans(load("runs/x/traces"))              # doctest: +SKIP
    """
    import pandas as pd

    require_table(df)
    rows = []
    # the host's ProfilerStep spans; GPU traces repeat them as gpu_user_annotation, not a step
    is_step = _is_step(df["name"]) & (df["track"].astype(str).to_numpy() == "cpu")
    steps = df[is_step & (df["dur_ns"].to_numpy() > 0)]
    for rank in sorted(df["rank"].unique().tolist()):
        mine = steps[steps["rank"] == rank]
        if len(mine):
            numbers = mine["name"].astype(str).str.slice(len(STEP_PREFIX)).astype(int)
            for number, ts, dur in zip(numbers, mine["ts_ns"], mine["dur_ns"], strict=True):
                rows.append((rank, int(number), int(ts), int(ts + dur), int(dur), "ProfilerStep"))
        else:
            sub = df[df["rank"] == rank]
            lo = int(sub["ts_ns"].min())
            hi = int((sub["ts_ns"] + sub["dur_ns"]).max())
            rows.append((rank, -1, lo, hi, hi - lo, WHOLE_TRACE))
    cols = ["rank", "step", "start_ns", "end_ns", "wall_ns", "span"]
    out = pd.DataFrame(rows, columns=cols)
    # a step exported twice (repeat cycles, duplicated files) keeps its longest span
    out = out.sort_values(["rank", "step", "wall_ns"]).drop_duplicates(
        ["rank", "step"], keep="last"
    )
    return out.reset_index(drop=True)


def _spans(sub: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    start = sub["ts_ns"].to_numpy(dtype=np.int64)
    return start, start + sub["dur_ns"].to_numpy(dtype=np.int64)


def rank_sets(sub: pd.DataFrame) -> tuple[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The busy-interval sets of one rank: ``comm``, ``compute``, ``memory``, ``host``.

    Returns ``(kind, sets)`` where kind is ``"device"`` when the rank has device events and
    ``"cpu"`` otherwise.
    """
    track = sub["track"].astype(str).to_numpy()
    device = sub["device"].to_numpy() if "device" in sub else np.full(len(sub), -1)
    on_device = np.isin(track, DEVICE_TRACKS) | ((track == "comm") & (device >= 0))
    cat = sub["cat"].astype(str).to_numpy()
    label = (cat == RANGE_CAT) & (track == "cpu")
    wrapper = _is_step(sub["name"]) | np.isin(cat, WRAPPER_CATS) | label
    host = np.isin(track, ("cpu", "runtime", "comm")) & ~on_device & ~wrapper
    sets: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if on_device.any():
        kind = "device"
        sets["comm"] = iv.union(*_spans(sub[(track == "comm") & on_device]))
        sets["compute"] = iv.union(*_spans(sub[track == "gpu"]))
        sets["memory"] = iv.union(*_spans(sub[np.isin(track, ("memcpy", "memset"))]))
        sets["host"] = iv.union(*_spans(sub[host]))
        return kind, sets
    kind = "cpu"
    comm = host & (track == "comm")
    sets["comm"] = iv.union(*_spans(sub[comm]))
    # per thread: an op that waits on a collective it wraps is not computing meanwhile
    work = []
    hosts = sub[host]
    comm_rows = comm[host]
    for _, idx in hosts.groupby(["pid", "tid"], observed=True, sort=False).indices.items():
        thread = hosts.iloc[idx]
        is_comm = comm_rows[idx]
        busy = iv.union(*_spans(thread[~is_comm]))
        work.append(iv.subtract(busy, iv.union(*_spans(thread[is_comm]))))
    sets["compute"] = iv.union_of(*work)
    empty = np.array([], dtype=np.int64)
    sets["memory"] = (empty, empty)
    sets["host"] = (empty, empty)
    return kind, sets


def _layers(sets: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """Cumulative unions, compute first: compute, +comm, +memory, +host."""
    layers = [sets["compute"]]
    for part in ("comm", "memory", "host"):
        layers.append(iv.union_of(layers[-1], sets[part]))
    return layers


def _parts(sets: dict, layers: list, start: int, end: int) -> tuple[int, ...]:
    """The six parts of the window ``[start, end)``, in ``PARTS`` order (they sum to its length)."""
    covered = [iv.measure(*layer, start, end) for layer in layers]
    comm = iv.measure(*sets["comm"], start, end)
    exposed = covered[1] - covered[0]  # comm where no compute runs
    hidden = comm - exposed
    return (
        covered[0] - hidden,
        hidden,
        exposed,
        covered[2] - covered[1],
        covered[3] - covered[2],
        end - start - covered[3],
    )


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

    spans = step_spans(df)
    rows = []
    for rank, sub in df.groupby("rank", sort=True):
        kind, sets = rank_sets(sub)
        layers = _layers(sets)
        for s in spans[spans["rank"] == rank].itertuples(index=False):
            parts = _parts(sets, layers, s.start_ns, s.end_ns)
            rows.append((rank, s.step, s.start_ns, s.wall_ns, *parts, kind, s.span))
    cols = ["rank", "step", "start_ns", "wall_ns", *(f"{p}_ns" for p in PARTS), "kind", "span"]
    return pd.DataFrame(rows, columns=cols)


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

    bd = data if "exposed_comm_ns" in data.columns else step_breakdown(data)
    cols = ["rank", "kind", "comm_ns", "hidden_ns", "exposed_ns", "compute_ns", "overlap_ratio"]
    rows = []
    for rank, mine in bd.groupby("rank", sort=True):
        hidden, exposed = int(mine["hidden_comm_ns"].sum()), int(mine["exposed_comm_ns"].sum())
        compute = int(mine["compute_ns"].sum()) + hidden
        comm = hidden + exposed
        ratio = hidden / comm if comm else float("nan")
        rows.append((rank, mine["kind"].iloc[0], comm, hidden, exposed, compute, ratio))
    return pd.DataFrame(rows, columns=cols)


def rank_steps(df: pd.DataFrame) -> pd.DataFrame:
    """Step wall time (ms) per step (rows) x rank (columns), with the straggler and the spread.

    ``straggler`` is the slowest rank of the step, ``spread_ms`` = slowest - fastest and
    ``spread_pct`` the spread relative to the median rank.

    >>> from hpcprof_kit import traces                       # doctest: +SKIP
    >>> traces.rank_steps(traces.load("runs/x/traces"))      # doctest: +SKIP
    """
    spans = step_spans(df)
    table = spans.pivot(index="step", columns="rank", values="wall_ns") / 1e6
    table.columns.name = "rank"
    times = table.to_numpy(dtype=float)
    valid = ~np.isnan(times).all(axis=1)
    straggler = np.full(len(table), -1)
    straggler[valid] = np.asarray(table.columns)[np.nanargmax(times[valid], axis=1)]
    spread = np.nanmax(times, axis=1, initial=-np.inf) - np.nanmin(times, axis=1, initial=np.inf)
    out = table.copy()
    out["straggler"] = straggler
    out["spread_ms"] = spread
    out["spread_pct"] = 100 * spread / np.nanmedian(times, axis=1)
    return out
