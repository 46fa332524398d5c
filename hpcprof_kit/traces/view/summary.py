"""Summaries first: each rank's trace reduced to a few small tables, and a run's tables made of them.

768 rank traces of 50-500 MB do not fit in one process; 768 summaries of a few hundred rows
do. :func:`summarise_rank` reduces one rank's trace table to a :class:`RankSummary` (its step
breakdown rows, and per name its ops', kernels' and collectives' counts and times);
:func:`combine` turns the summaries of a run into a :class:`RunSummary`: the tables a
run-level analysis shows. Every number is the one the analyses give on the whole table
(``rank_steps``, ``step_breakdown``, ``comm_overlap``, ``top_ops``, ``top_kernels``,
``same_name`` per rank), to the nanosecond, since each of them works rank by rank and the
summaries keep integer nanoseconds. Summaries are stored as ``.npz`` files
(:func:`hpcprof_kit.traces.reporting.summary_store.write_summary`, ``read_summary``).

>>> from hpcprof_kit import traces                                  # doctest: +SKIP
>>> from hpcprof_kit.traces.view.summary import summarise                # doctest: +SKIP
>>> run = summarise(traces.load("runs/x/traces"))                   # doctest: +SKIP
>>> run.stragglers.head()                                           # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hpcprof_kit.errors import SpecError, TraceFormatError
from hpcprof_kit.traces.analyses import breakdown as bd
from hpcprof_kit.traces.analyses.breakdown import PARTS, bare, comm_overlap, rank_steps, text_test
from hpcprof_kit.traces.analyses.ops import (
    KERNEL_TRACKS,
    kernel_name,
    same_name,
    top_kernels,
    top_ops,
)
from hpcprof_kit.traces.read.naming import check_same_run
from hpcprof_kit.traces.table.order import by_value
from hpcprof_kit.traces.view.op_ids import op_id_holes
from hpcprof_kit.traces.view.signals import (
    SIGNAL_COLUMNS,
    WAIT_COLUMNS,
    copy_waits,
    signals,
    sync_gaps,
)
from hpcprof_kit.traces.view.slower import MEDIAN_COLUMNS, name_medians
from hpcprof_kit.traces.view.startup import COLUMNS as SPAN_COLUMNS
from hpcprof_kit.traces.view.startup import startup_spans

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

TOP_N = 20  # rows of the top-ops and top-kernels tables
SAME_NAME_TOP = 3  # per rank: same-name statistics of its top 3 ops and top 3 kernels
SLOWEST = 5  # the slowest ranks whose own top ops a run summary keeps
TOTALS = ["count", "total_ns", "self_ns", "max_ns"]
_EVERY = 2**62  # "all rows" for top_ops(n=...)


@dataclass
class RankSummary:
    """One rank's trace, small: what :func:`combine` needs, in integer nanoseconds."""

    rank: int
    meta: dict[str, Any]  # sources, events, world_size, backend, format, warnings, skipped
    breakdown: pd.DataFrame  # step_breakdown rows of this rank (step times: wall_ns)
    ops: pd.DataFrame  # op, count, total_ns, self_ns, max_ns; every op, first seen first
    kernels: pd.DataFrame  # kernel, count, total_ns, self_ns, max_ns
    comm: pd.DataFrame  # collective, count, total_ns, max_ns (comm track, by kernel name)
    same: pd.DataFrame  # same_name(df, name) row of this rank for its top names
    signals: pd.DataFrame | None = None  # findings.signals of this rank (report rules)
    waits: pd.DataFrame | None = None  # signals.copy_waits of this rank (the sync_copy rule)
    startup: pd.DataFrame | None = None  # startup.startup_spans of this rank, with a rank column
    medians: pd.DataFrame | None = None  # slower.name_medians of this rank (the straggler's)


@dataclass
class RunSummary:
    """A run's tables, made of its ranks' summaries (see :func:`combine`)."""

    summary: pd.DataFrame  # per rank: kind, events, steps, wall and parts (ms): `traces summary`
    breakdown: pd.DataFrame  # step_breakdown of the run
    steps: pd.DataFrame  # rank_steps of the run: the heatmap's input
    stragglers: pd.DataFrame  # ranks by mean time worked before waiting, slowest first
    spread: pd.DataFrame  # per part: min/p10/median/p90/max across ranks (each rank's mean)
    overlap: pd.DataFrame  # comm_overlap of the run
    comm: pd.DataFrame  # per collective: ranks, count, total_ms, mean_us, max_us
    top_ops: pd.DataFrame  # top_ops of the run
    top_kernels: pd.DataFrame  # top_kernels of the run
    slowest_ops: pd.DataFrame  # top_ops of each of the slowest ranks, with a rank column
    same_name: pd.DataFrame  # per name and rank: same_name's row of that rank
    signals: pd.DataFrame | None = None  # findings.signals of every rank (report rules)
    waits: pd.DataFrame | None = None  # signals.copy_waits of every rank (the sync_copy rule)
    startup: pd.DataFrame | None = None  # startup.startup_spans of every rank without steps
    medians: pd.DataFrame | None = None  # slower.name_medians of every rank
    failures: list[dict[str, str]] = field(default_factory=list)  # files that did not load
    ranks: dict[int, dict[str, Any]] = field(default_factory=dict)  # each rank's meta, by rank

    def tables(self) -> dict[str, pd.DataFrame]:
        """Name -> table, as written by :meth:`write_tables` (one CSV each)."""
        return {
            "summary": self.summary,
            "breakdown": self.breakdown,
            "rank_steps": self.steps.reset_index(),
            "stragglers": self.stragglers,
            "breakdown_spread": self.spread,
            "comm_overlap": self.overlap,
            "collectives": self.comm,
            "top_ops": self.top_ops.reset_index(),
            "top_kernels": self.top_kernels.reset_index(),
            "slowest_ranks_top_ops": self.slowest_ops,
            "same_name": self.same_name,
        }


def summarise_rank(df: pd.DataFrame) -> RankSummary:
    """The summary of one rank's trace table (``load`` of its file, or its rows of a run).

    >>> from hpcprof_kit import traces                                        # doctest: +SKIP
    >>> s = summarise_rank(traces.load("runs/x/traces/trace-3-of-8.json"))   # doctest: +SKIP
    >>> s.breakdown[["step", "wall_ns", "exposed_comm_ns"]]                   # doctest: +SKIP
    """
    ranks = np.unique(df["rank"].to_numpy()) if "rank" in df else []
    if len(ranks) != 1:
        raise SpecError(
            f"summarise_rank takes the table of one rank, got ranks {list(ranks)[:5]}; "
            "use summarise(df) for a run, or df[df['rank'] == r] for one rank"
        )
    rank = int(ranks[0])
    meta = dict(df.attrs.get("ranks", {}).get(rank, {}))
    keep = ("world_size", "backend", "format", "skipped", "warnings", "device_properties")
    meta = {k: meta.get(k) for k in keep}
    meta["sources"] = _sources(df.attrs.get("ranks", {}).get(rank, {}))
    meta["events"] = len(df)
    meta["op_ids"] = op_id_holes(df).get(rank)
    ops, kernels = _name_totals(df, "op"), _name_totals(df, "kernel")
    names: list[str] = []
    for totals, what in ((ops, "op"), (kernels, "kernel")):
        top = by_value(totals, "self_ns", names=(what,))[what]
        names += [n for n in top.head(SAME_NAME_TOP) if n not in names]
    gaps = sync_gaps(df)
    waits = copy_waits(df, gaps)
    return RankSummary(
        rank,
        meta,
        bd.step_breakdown(df),
        ops,
        kernels,
        _comm_totals(df),
        _same_rows(df, rank, names),
        signals(df, gaps, waits=waits),
        waits,
        startup_spans(df).reset_index(),
        name_medians(df),
    )


def _sources(meta: dict) -> list[str]:
    return [str(s) for s in meta.get("sources") or [meta.get("source", "")]]


def _codes_in_order(df: pd.DataFrame, rows: np.ndarray, label=str) -> list[str]:
    """The names of ``rows`` in order of first appearance (``label`` applied to each)."""
    import pandas as pd

    names = df["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        codes = pd.unique(names.cat.codes.to_numpy()[rows])
        labels = names.cat.categories.astype(str)
        found = [label(labels[c]) if c >= 0 else label("nan") for c in codes]
    else:
        found = [label(n) for n in pd.unique(names.astype(str).to_numpy()[rows])]
    return list(dict.fromkeys(found))


def _name_totals(df: pd.DataFrame, what: str) -> pd.DataFrame:
    """Per op (or kernel) name: count, total, self and max time in ns, first seen first.

    The numbers are top_ops' (top_kernels'), whose milliseconds give back the exact
    integer nanoseconds; the order is the table's, which combine() needs to add the ranks
    up in the order the whole run's table lists them."""
    import pandas as pd

    device = df["device"].to_numpy()
    positive = df["dur_ns"].to_numpy() > 0
    if what == "op":
        rows = text_test(df["cat"], lambda s: s == "cpu_op") & (device < 0) & positive
        table, label = top_ops(df, n=_EVERY), str
    else:
        rows = text_test(df["track"], lambda s: s.isin(KERNEL_TRACKS)) & (device >= 0) & positive
        table, label = top_kernels(df, n=_EVERY), kernel_name
    order = [n for n in _codes_in_order(df, np.flatnonzero(rows), label) if n in table.index]
    order += [n for n in table.index if n not in set(order)]
    table = table.reindex(order)
    return pd.DataFrame(
        {
            what: pd.Series(order, dtype=str),
            "count": table["count"].to_numpy(dtype=np.int64),
            "total_ns": _ns(table["total_ms"], 1e6),
            "self_ns": _ns(table["self_ms"], 1e6),
            "max_ns": _ns(table["max_us"], 1e3),
        }
    )


def _ns(values: pd.Series, scale: float) -> np.ndarray:
    return np.rint(values.to_numpy(dtype=float) * scale).astype(np.int64)


def _comm_totals(df: pd.DataFrame) -> pd.DataFrame:
    """Per collective (the comm track's names, unitrace's geometry left out): count, total
    and max time in ns."""
    import pandas as pd

    rows = text_test(df["track"], lambda s: s == "comm") & (df["dur_ns"].to_numpy() > 0)
    sub = df[rows]
    names = sub["name"].astype(str).map(kernel_name)
    g = sub["dur_ns"].groupby(names.to_numpy(), sort=False)
    return pd.DataFrame(
        {
            "collective": pd.Series(list(g.size().index), dtype=str),
            "count": g.size().to_numpy(dtype=np.int64),
            "total_ns": g.sum().to_numpy(dtype=np.int64),
            "max_ns": g.max().to_numpy(dtype=np.int64),
        }
    )


SAME_COLUMNS = ["count", "total_ms", "min_us", "median_us", "p90_us", "max_us", "std_us"]


def _same_rows(df: pd.DataFrame, rank: int, names: list[str]) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for name in names:
        table = same_name(bare(df), name)  # bare: no copy of the run's metadata
        rows.append({"name": name, "rank": rank, **table.loc[str(rank), SAME_COLUMNS]})
    out = pd.DataFrame(rows, columns=["name", "rank", *SAME_COLUMNS])
    return out.astype({"name": str, "rank": np.int64, "count": np.int64})


def combine(
    summaries: list[RankSummary], failures: list[dict[str, str]] | None = None
) -> RunSummary:
    """The run's tables from its ranks' summaries, ranks taken in their files' order.

    ``failures`` (files that did not load: ``{"file", "reason"}``) are carried along.

    >>> from hpcprof_kit.traces.reporting.summary_store import read_summary   # doctest: +SKIP
    >>> run = combine([read_summary(p) for p in sorted(Path("summaries").glob("*.npz"))])  # doctest: +SKIP
    >>> run.steps                                                   # doctest: +SKIP
    """
    import pandas as pd

    from hpcprof_kit.traces.analyses.spread import part_spread

    seen = {}
    for s in summaries:
        if s.rank in seen:
            raise TraceFormatError(
                f"two summaries claim rank {s.rank}: {seen[s.rank]} and {s.meta['sources']}; "
                "they come from different runs: summarise one run at a time"
            )
        seen[s.rank] = s.meta["sources"]
    # ranks of different runs (another world size) are refused as load refuses them
    check_same_run([Path(s.meta["sources"][0]) for s in summaries], summaries)
    by_file = sorted(summaries, key=lambda s: [Path(p) for p in s.meta["sources"]])
    by_rank = sorted(summaries, key=lambda s: s.rank)
    breakdown = _concat([s.breakdown for s in by_rank], _step_breakdown_columns())
    steps = rank_steps(breakdown)
    stragglers = straggler_table(breakdown, steps)
    slow = stragglers["rank"].to_numpy()
    timed = ~np.isnan(stragglers["mean_busy_ms"].to_numpy())
    events = pd.Series({s.rank: s.meta["events"] for s in by_rank}, dtype=np.int64)
    named = [s for s in by_rank if not s.breakdown.empty]
    slowest = [int(r) for r in slow[: min(SLOWEST, int(timed.sum()))]]
    of_rank = {s.rank: s for s in summaries}
    slowest_ops = _concat(
        [top_table(of_rank[r].ops, "op").reset_index().assign(rank=r) for r in slowest], []
    )
    return RunSummary(
        summary=rank_table(breakdown, events),
        breakdown=breakdown,
        steps=steps,
        stragglers=stragglers,
        spread=part_spread(breakdown) if named else pd.DataFrame(),
        overlap=comm_overlap(breakdown),
        comm=_run_comm([s.comm.assign(rank=s.rank) for s in by_file]),
        top_ops=top_table(_concat([s.ops for s in by_file], ["op", *TOTALS]), "op"),
        top_kernels=top_table(_concat([s.kernels for s in by_file], ["kernel", *TOTALS]), "kernel"),
        slowest_ops=slowest_ops,
        same_name=_concat([s.same for s in by_rank], ["name", "rank", *SAME_COLUMNS]),
        signals=_concat([s.signals for s in by_rank if s.signals is not None], SIGNAL_COLUMNS),
        waits=_concat([s.waits for s in by_rank if s.waits is not None], WAIT_COLUMNS),
        startup=_concat([s.startup for s in by_rank if s.startup is not None], SPAN_COLUMNS),
        medians=_concat([s.medians for s in by_rank if s.medians is not None], MEDIAN_COLUMNS),
        failures=list(failures or []),
        ranks={s.rank: s.meta for s in by_rank},
    )


def straggler_table(breakdown: pd.DataFrame, steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """The ranks of a :func:`~hpcprof_kit.traces.analyses.breakdown.step_breakdown` table, the slowest
    first: by the mean time each worked in a step before it waited for communication
    (``mean_busy_ms``), with its mean wait (``mean_wait_ms``: exposed comm) and wall time,
    how many steps it ran, in how many it was the straggler (``rank_steps``), and the mean of
    what it cost the others in those steps (``mean_cost_ms``: its busy time minus the median
    rank's). Ties in the mean keep the lower rank first.

    >>> import pandas as pd
    >>> b = pd.DataFrame({"rank": [0, 1], "step": [1, 1], "wall_ns": [10_000_000] * 2,
    ...                   "exposed_comm_ns": [4_000_000, 0]})
    >>> straggler_table(b)[["rank", "mean_busy_ms", "mean_wait_ms", "straggler_steps"]]
       rank  mean_busy_ms  mean_wait_ms  straggler_steps
    0     1          10.0           0.0                1
    1     0           6.0           4.0                0
    """
    import pandas as pd

    steps = rank_steps(breakdown) if steps is None else steps
    busy, wait = bd.busy_and_wait(breakdown)
    per = pd.DataFrame(
        {
            "rank": breakdown["rank"].to_numpy(dtype=np.int64),
            "busy": busy / 1e6,
            "wait": wait / 1e6,
            "wall": breakdown["wall_ns"].to_numpy(dtype=float) / 1e6,
        }
    )
    g = per.groupby("rank", sort=True)
    out = pd.DataFrame(
        {
            "rank": g.size().index.to_numpy(dtype=np.int64),
            "mean_busy_ms": g["busy"].mean().to_numpy(),
            "mean_wait_ms": g["wait"].mean().to_numpy(),
            "mean_wall_ms": g["wall"].mean().to_numpy(),
            "steps": g.size().to_numpy(dtype=np.int64),
        }
    )
    named = steps["straggler"].to_numpy()
    cost = steps["cost_ms"].to_numpy(dtype=float)
    out["straggler_steps"] = [int((named == r).sum()) for r in out["rank"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out["mean_cost_ms"] = [float(np.nanmean(cost[named == r])) for r in out["rank"]]
    order = np.lexsort((out["rank"].to_numpy(), -out["mean_busy_ms"].to_numpy()))
    return out.iloc[order].reset_index(drop=True)


def summarise(df: pd.DataFrame) -> RunSummary:
    """:func:`combine` of every rank's :func:`summarise_rank`: the one-process path.

    >>> from hpcprof_kit import traces                                  # doctest: +SKIP
    >>> summarise(traces.load("runs/x/traces")).top_ops                 # doctest: +SKIP
    """
    order, ranks, bounds = bd.rank_groups(df["rank"].to_numpy())
    out = []
    for i, rank in enumerate(ranks):
        sub = df.iloc[order[bounds[i] : bounds[i + 1]]]
        sub.attrs = {"ranks": {int(rank): df.attrs.get("ranks", {}).get(int(rank), {})}}
        out.append(summarise_rank(sub))
    return combine(out)


def _concat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    import pandas as pd

    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame([], columns=columns)
    return pd.concat(frames, ignore_index=True)


def _step_breakdown_columns() -> list[str]:
    return ["rank", "step", "start_ns", "wall_ns", *(f"{p}_ns" for p in PARTS), "kind", "span"]


def rank_table(breakdown: pd.DataFrame, events: pd.Series) -> pd.DataFrame:
    """Per rank: kind, events, steps, and the breakdown parts summed over the steps (ms):
    the table of ``hpcprof-kit traces summary``. ``events`` is rows per rank."""
    cols = ["wall_ns", *(f"{p}_ns" for p in PARTS)]
    totals = breakdown.groupby("rank")[cols].sum() / 1e6
    totals.columns = [c.replace("_ns", "_ms") for c in cols]
    steps = breakdown[breakdown["step"] >= 0].groupby("rank").size()
    out = totals.copy()
    out.insert(0, "steps", steps.reindex(out.index, fill_value=0))
    out.insert(0, "events", events.reindex(out.index))
    out.insert(0, "kind", breakdown.groupby("rank")["kind"].first())
    return out.reset_index()


def top_table(totals: pd.DataFrame, what: str, n: int = TOP_N) -> pd.DataFrame:
    """``top_ops`` / ``top_kernels`` from per-name totals (one rank's, or several ranks'
    stacked in the run's order): the same columns, numbers and order."""
    import pandas as pd

    kinds = {what: str} if len(totals) else {}  # an empty name index stays object, as top_ops'
    totals = totals.astype({**kinds, **dict.fromkeys(TOTALS, np.int64)})
    g = totals.groupby(what, sort=False)
    t = pd.DataFrame({"count": g["count"].sum(), "total_ns": g["total_ns"].sum()})
    t["self_ns"], t["max_ns"] = g["self_ns"].sum(), g["max_ns"].max()
    table = pd.DataFrame(
        {
            "count": t["count"].astype(np.int64),
            "total_ms": t["total_ns"] / 1e6,
            "self_ms": t["self_ns"] / 1e6,
            "mean_us": t["total_ns"] / t["count"] / 1e3,
            "max_us": t["max_ns"] / 1e3,
        }
    )
    all_self = int(t["self_ns"].sum())  # whole ns, as top_ops sums them
    table["share"] = t["self_ns"] / all_self if all_self else 0.0
    return by_value(table, "self_ms").head(n)


def _run_comm(frames: list[pd.DataFrame]) -> pd.DataFrame:
    import pandas as pd

    cols = ["collective", "ranks", "count", "total_ms", "mean_us", "max_us"]
    stacked = _concat(frames, [])
    if stacked.empty:
        return pd.DataFrame([], columns=cols)
    g = stacked.groupby("collective", sort=False)
    count, total = g["count"].sum(), g["total_ns"].sum()
    out = pd.DataFrame(
        {
            "ranks": g["rank"].nunique(),
            "count": count,
            "total_ms": total / 1e6,
            "mean_us": total / count / 1e3,
            "max_us": g["max_ns"].max() / 1e3,
        }
    )
    return by_value(out, "total_ms").reset_index()[cols]
