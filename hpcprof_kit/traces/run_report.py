"""One report of a run: the panes TensorBoard's profiler plugin had, and what looks wrong.

:func:`report` reads a run (a trace table, or the path of a run directory, a traces folder
or trace files) and returns a :class:`Report`:

- ``findings``: what looks wrong, each with its number, threshold, evidence and what to try
  (:mod:`hpcprof_kit.traces.findings` documents the vocabulary);
- ``panes``: *overview* (step time per rank, the breakdown, device utilisation, the device's
  idle time by cause, the events by category), *operators*, *kernels* (top kernels, the op
  that launched each, launch statistics, duration distributions), *memory* (peak per step)
  and *distributed* (time worked before waiting per rank and step, the stragglers,
  communication/compute overlap, each collective's calls and start skew). Every pane holds
  tables; a pane that the trace cannot fill says which table is missing and why.

It shows as JSON (:meth:`Report.to_dict`, ``hpcprof-kit traces report RUN --json``), as one
HTML file that opens offline (:meth:`Report.write_html`, ``-o report.html``) and, in
JupyterLab, as a tab per pane with the findings on top (:meth:`Report.show`).

>>> from hpcprof_kit import traces                                      # doctest: +SKIP
>>> rep = traces.report("runs/demo_local_N1_R2_20260101-120000")        # doctest: +SKIP
>>> [f["kind"] for f in rep.findings]                                   # doctest: +SKIP
>>> rep.panes["distributed"].tables["stragglers"]                       # doctest: +SKIP
>>> rep.write_html("report.html")                                       # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces import breakdown as bd
from hpcprof_kit.traces import findings as fnd
from hpcprof_kit.traces.breakdown import PARTS, bare, text_test
from hpcprof_kit.traces.kineto import CATEGORY_TRACKS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

PANES = ("overview", "operators", "kernels", "memory", "distributed")
PANE_TITLES = {
    "overview": "Overview",
    "operators": "Operators",
    "kernels": "Kernels",
    "memory": "Memory",
    "distributed": "Distributed",
}
# categories the kit reads on purpose; any other is counted in the overview and named
KNOWN_CATS = frozenset(
    {
        *CATEGORY_TRACKS,
        "cpu_op",
        "user_annotation",
        "python_function",
        "cpu_instant_event",
        "Trace",
        "ac2g",
        "",
        "overhead",
        "fwdbwd",
        "Spans",
    }
)


@dataclass
class Pane:
    """One pane: its tables by name, notes to read them by, and what it could not show."""

    title: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)  # table -> why it is not there


@dataclass
class Report:
    """What :func:`report` returns; see the module docstring."""

    run: dict[str, Any]
    findings: list[dict[str, Any]]
    panes: dict[str, Pane]
    table: pd.DataFrame | None = field(default=None, repr=False)  # the trace table
    breakdown: pd.DataFrame | None = field(default=None, repr=False)  # its step_breakdown

    def to_dict(self) -> dict[str, Any]:
        """``{"run", "findings", "panes": {name: {"title", "tables", "notes", "missing"}}}``
        with every table as a list of row dicts (NaN as null): what ``--json`` prints."""
        return {
            "run": self.run,
            "findings": self.findings,
            "rules_not_run": dict(getattr(self.findings, "coverage", {})),  # kind -> why
            "panes": {
                name: {
                    "title": pane.title,
                    "tables": {k: records(v) for k, v in pane.tables.items()},
                    "notes": pane.notes,
                    "missing": pane.missing,
                }
                for name, pane in self.panes.items()
            },
        }

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=_plain)

    def figures(self, pane: str) -> dict[str, Any]:
        """The plots of one pane, drawn now (name -> :class:`~hpcprof_kit.traces.figure.Plot`)."""
        from hpcprof_kit.traces.report_plots import pane_figures

        return pane_figures(self, pane)

    def write_html(self, path: str | Path, *, force: bool = False) -> Path:
        """One HTML file with every pane, its tables and its plots inline; opens offline."""
        from hpcprof_kit.traces.report_html import write_html

        return write_html(self, Path(path), force=force)

    def show(self):
        """In JupyterLab: the findings, then a tab per pane (ipywidgets)."""
        from hpcprof_kit.widgets.report import report_tabs

        return report_tabs(self)

    def _repr_html_(self) -> str:
        from hpcprof_kit.traces.report_html import findings_html

        return findings_html(self.findings, self.run)


def records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """A table as JSON-ready row dicts: index kept as columns when it is named, NaN as None."""
    if table.index.name is not None or getattr(table.index, "names", [None])[0] is not None:
        table = table.reset_index()
    out = []
    for row in table.to_dict(orient="records"):
        out.append({str(k): _plain(v) for k, v in row.items()})
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if math.isnan(value) else float(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, (tuple, list, np.ndarray)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (int, str, bool, dict)):
        return value
    try:
        if value != value:  # pandas NA
            return None
    except (TypeError, ValueError):
        pass
    return str(value)


def report(data, *, top: int = 20) -> Report:
    """The report of a run: a trace table, or a path (run directory, traces folder, trace
    files) that :func:`hpcprof_kit.traces.load` reads, refusing ranks of different runs as
    it does. ``top`` is the rows of the top-ops and top-kernels tables.
    """
    import pandas as pd

    if isinstance(data, pd.DataFrame):
        df = data
    else:
        from hpcprof_kit.traces.loader import load

        df = load(data)
    if len(df) == 0:
        raise TraceFormatError(
            "the trace table is empty, so there is nothing to report; check the run's traces "
            "folder (hpcprof-kit traces summary RUN says what each file held)"
        )
    meta = df.attrs.get("ranks", {})
    facts = run_facts(df)
    # the analyses below need no metadata: pandas would copy it at every step
    full, df = df, bare(df)
    b = bd.step_breakdown(df)
    steps = bd.rank_steps(b)
    panes = {
        "overview": overview(df, b),
        "operators": operators(df, top),
        "kernels": kernels(df, top),
        "memory": memory(full),  # the memory events' sizes are read from the files again
        "distributed": distributed(df, b, steps),
    }
    facts["kind"] = ",".join(sorted(set(b["kind"]))) if len(b) else None
    facts["steps"] = sorted(int(s) for s in np.unique(b["step"].to_numpy())) if len(b) else []
    return Report(facts, fnd.find(df, b, steps, meta), panes, full, b)


def run_facts(df: pd.DataFrame) -> dict[str, Any]:
    """What the run is: ranks, world size, events, devices, the files read (the report adds
    the trace's kind and steps)."""
    meta = df.attrs.get("ranks", {})
    return {
        "ranks": sorted(int(r) for r in np.unique(df["rank"].to_numpy())),
        "world_size": fnd.world_size(meta) if meta else None,
        "events": int(len(df)),
        "devices": sorted(
            {str(p.get("name")) for m in meta.values() for p in (m.get("device_properties") or [])}
        ),
        "sources": sorted(str(m.get("source")) for m in meta.values() if m.get("source"))[:8],
    }


def _quantiles(values: np.ndarray) -> dict[str, float]:
    if values.size == 0:
        return {"p10": math.nan, "median": math.nan, "p90": math.nan}
    p10, med, p90 = np.quantile(values, [0.1, 0.5, 0.9])
    return {"p10": float(p10), "median": float(med), "p90": float(p90)}


SUMMARY_ONLY = "not kept in the per-rank summaries of an --mpi report; run it in one process"


def overview(df: pd.DataFrame | None, b: pd.DataFrame) -> Pane:
    import pandas as pd

    pane = Pane(PANE_TITLES["overview"])
    if b.empty:
        pane.missing["steps"] = "the trace has no events with a duration"
        return pane
    busy, wait = bd.busy_and_wait(b)
    rows = []
    for rank, idx in b.groupby("rank").indices.items():
        wall = b["wall_ns"].to_numpy()[idx] / 1e6
        q = _quantiles(wall)
        rows.append(
            {
                "rank": int(rank),
                "kind": b["kind"].iloc[idx[0]],
                "steps": int(idx.size),
                "wall_median_ms": q["median"],
                "wall_p10_ms": q["p10"],
                "wall_p90_ms": q["p90"],
                "worked_median_ms": float(np.median(busy[idx])) / 1e6,
                "waited_median_ms": float(np.median(wait[idx])) / 1e6,
            }
        )
    pane.tables["steps"] = pd.DataFrame(rows)
    total = float(b["wall_ns"].sum()) or 1.0
    parts = pd.DataFrame(
        {
            "part": list(PARTS),
            "total_ms": [float(b[f"{p}_ns"].sum()) / 1e6 for p in PARTS],
            "share_pct": [100.0 * float(b[f"{p}_ns"].sum()) / total for p in PARTS],
        }
    )
    pane.tables["breakdown"] = parts
    device = b[b["kind"] == "device"]
    if len(device):
        g = device.groupby("rank")
        wall = g["wall_ns"].sum().astype(float)
        pane.tables["utilisation"] = pd.DataFrame(
            {
                "rank": wall.index.to_numpy(dtype=np.int64),
                "compute_pct": 100 * (g["compute_ns"].sum() + g["hidden_comm_ns"].sum()) / wall,
                "comm_pct": 100 * (g["hidden_comm_ns"].sum() + g["exposed_comm_ns"].sum()) / wall,
                "memory_pct": 100 * g["memory_ns"].sum() / wall,
                "device_idle_pct": 100 * (g["host_ns"].sum() + g["idle_ns"].sum()) / wall,
            }
        ).reset_index(drop=True)
        try:
            from hpcprof_kit.traces.device_idle import idle_split

            if df is None:
                pane.missing["idle_split"] = SUMMARY_ONLY
            else:
                split = idle_split(df)
                pane.tables["idle_split"] = split[split["stream"] == -1].reset_index(drop=True)
        except TraceFormatError as exc:
            pane.missing["idle_split"] = str(exc)
    else:
        why = "a CPU-only trace: no device events, so no device utilisation or idle split"
        pane.missing["utilisation"] = why
        pane.missing["idle_split"] = why
    if df is None:
        pane.missing["categories"] = SUMMARY_ONLY
    else:
        pane.tables["categories"] = categories(df)
    unknown = pane.tables["categories"].query("known == False") if df is not None else ()
    if len(unknown):
        names = ", ".join(repr(c) for c in unknown["cat"])
        pane.notes.append(
            f"{int(unknown['events'].sum())} events of categories the kit does not know "
            f"({names}) are counted in the table above and kept on the track shown"
        )
    pane.notes.append(
        "worked = wall - exposed comm: the time a rank worked before it waited for the others"
    )
    return pane


def categories(df: pd.DataFrame) -> pd.DataFrame:
    """Events per category and track, with whether the kit reads that category on purpose."""
    import pandas as pd

    df = bare(df)
    counts = df.groupby(["cat", "track"], observed=True).size().rename("events").reset_index()
    counts = counts.astype({"cat": str, "track": str})
    counts.columns = ["cat", "track", "events"]
    counts["known"] = counts["cat"].isin(KNOWN_CATS)
    counts = counts.sort_values(["events", "cat"], ascending=[False, True]).reset_index(drop=True)
    return pd.DataFrame(counts)


def operators(df: pd.DataFrame, top: int) -> Pane:
    from hpcprof_kit.traces.ops import top_ops, user_ranges

    pane = Pane(PANE_TITLES["operators"])
    ops = top_ops(df, n=top)
    if len(ops):
        pane.tables["top_ops"] = ops
    else:
        pane.missing["top_ops"] = "no cpu_op events: the profiler recorded no host operators"
    with warnings.catch_warnings():  # no ranges is a fine answer here: the table is left out
        warnings.simplefilter("ignore")
        ranges = user_ranges(df, n=top)
    if len(ranges):
        pane.tables["user_ranges"] = ranges
    pane.missing["input_shapes"] = (
        "the kit's trace table keeps no event arguments, so input shapes are not shown; "
        "profile with record_shapes=True and read them with "
        "prof.key_averages(group_by_input_shape=True)"
    )
    return pane


def kernels(df: pd.DataFrame, top: int) -> Pane:
    from hpcprof_kit.traces.ops import top_kernels

    pane = Pane(PANE_TITLES["kernels"])
    table = top_kernels(df, n=top)
    if table.empty:
        why = (
            "no device kernels: a CPU-only trace; record on a GPU with "
            "ProfilerActivity.CUDA or ProfilerActivity.XPU"
        )
        for name in ("top_kernels", "launched_by", "durations", "launches"):
            pane.missing[name] = why
        return pane
    pane.tables["top_kernels"] = table
    pane.tables["launched_by"] = launched_by(df, list(table.index)[:top])
    pane.tables["durations"] = kernel_durations(df, list(table.index)[:top])
    try:
        from hpcprof_kit.traces.device_idle import launch_stats, launch_summary

        stats = launch_stats(df)
        pane.tables["launches"] = launch_summary(stats)
        pane.notes.append(
            "launch delay = the kernel's start minus the end of the call that launched it "
            "(HTA's definition)"
        )
    except TraceFormatError as exc:
        pane.missing["launches"] = str(exc)
    short = pane.tables["durations"]
    if len(short):
        n = int(short["count"].sum())
        pane.notes.append(f"{int(short['under_10us'].sum())} of these {n} kernels last under 10 µs")
    return pane


def kernel_durations(df: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Per kernel of ``names``: count, min / p10 / median / p90 / max duration (µs) and how
    many last under 10 µs."""
    import pandas as pd

    from hpcprof_kit.traces.ops import kernel_name

    df = bare(df)
    sub = df[fnd.kernel_rows(df)]
    short = sub["name"].map(kernel_name).astype(str)  # a category column maps each label once
    rows = []
    for name in names:
        us = sub["dur_ns"].to_numpy()[(short == name).to_numpy()] / 1e3
        if us.size == 0:
            continue
        q = np.quantile(us, [0.0, 0.1, 0.5, 0.9, 1.0])
        rows.append(
            {
                "kernel": name,
                "count": int(us.size),
                "min_us": q[0],
                "p10_us": q[1],
                "median_us": q[2],
                "p90_us": q[3],
                "max_us": q[4],
                "under_10us": int((us < fnd.SHORT_KERNEL_NS / 1e3).sum()),
            }
        )
    return pd.DataFrame(rows)


def launched_by(df: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Per kernel of ``names``: the host op that launched it most often (kernel -> launch
    call by correlation id -> the op of the same External id), with how many of its
    launches that op made."""
    import pandas as pd

    from hpcprof_kit.traces.ops import kernel_name

    df = bare(df)
    kern = df[fnd.kernel_rows(df) & (df["corr"].to_numpy() >= 0)]
    runtime = df[text_test(df["track"], lambda s: s == "runtime") & (df["corr"].to_numpy() >= 0)]
    ops = df[
        text_test(df["cat"], lambda s: s == "cpu_op")
        & (df["ext_id"].to_numpy() >= 0)
        & (df["device"].to_numpy() < 0)
    ]
    cols = ["kernel", "op", "launches", "of_kernel"]
    if kern.empty or runtime.empty or ops.empty:
        return pd.DataFrame([], columns=cols)
    call = runtime[["rank", "corr", "ext_id"]].drop_duplicates(["rank", "corr"])
    # the innermost op of an External id: the shortest one
    op = ops.sort_values("dur_ns").drop_duplicates(["rank", "ext_id"])[["rank", "ext_id", "name"]]
    k = kern[["rank", "corr"]].assign(kernel=kern["name"].map(kernel_name).astype(str))
    k = k[k["kernel"].isin(names)]
    k = k.merge(call, on=["rank", "corr"], how="left").merge(
        op.rename(columns={"name": "op"}), on=["rank", "ext_id"], how="left"
    )
    k["op"] = k["op"].astype(object).where(k["op"].notna(), "(no op found)").astype(str)
    rows = []
    for name in names:
        mine = k[k["kernel"] == name]
        if mine.empty:
            continue
        counts = mine["op"].value_counts()
        best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        rows.append(
            {"kernel": name, "op": best[0], "launches": int(best[1]), "of_kernel": len(mine)}
        )
    return pd.DataFrame(rows, columns=cols)


def memory(df: pd.DataFrame) -> Pane:
    from hpcprof_kit.traces.memory import memory_peaks

    pane = Pane(PANE_TITLES["memory"])
    peaks = memory_peaks(df)
    if peaks.empty:
        pane.missing["peaks"] = (
            "no [memory] events: profile with profile_memory=True to see the memory timeline "
            "and the peak of each step"
        )
        return pane
    pane.tables["peaks"] = peaks
    pane.notes.append("growth = the step's peak minus what was allocated when it started")
    return pane


def distributed(df: pd.DataFrame, b: pd.DataFrame, steps: pd.DataFrame) -> Pane:
    from hpcprof_kit.traces.at_scale.summary import straggler_table

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
    named = [int(r) for r in steps["straggler"] if r >= 0]
    if named and ranks > 1:
        rank = max(sorted(set(named)), key=named.count)
        import pandas as pd

        slower = pd.DataFrame(fnd.slower_names(df, rank, top=10))
        if len(slower):
            pane.tables["straggler_kernels"] = slower.assign(rank=rank)
    pane.missing["message_sizes"] = (
        "the kit's trace table keeps no event arguments, so collective sizes, algorithm and "
        "bus bandwidth are not computed"
    )
    return pane


def collectives(df: pd.DataFrame) -> pd.DataFrame:
    """Per collective (communication events by name): ranks, calls, total and mean time, and
    the start skew between ranks (the k-th call of a name in a step on every rank: its
    latest start minus its earliest), median and max, in µs."""
    import pandas as pd

    from hpcprof_kit.traces.ops import kernel_name

    df = bare(df)
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


def report_from_summary(run, top: int = 20) -> Report:
    """The report of a run from its per-rank summaries (:class:`~hpcprof_kit.traces.at_scale.summary.
    RunSummary`, what ``hpcprof-kit traces report PATH --mpi`` gathers on MPI rank 0): the
    same findings with the same numbers as :func:`report` of the whole table (their evidence
    lacks what needs the events: the host ops during device idle, the sync calls by name),
    and the panes a summary can fill; the others say so."""
    import pandas as pd

    b, steps = run.breakdown, run.steps
    sig = run.signals if run.signals is not None else pd.DataFrame(columns=fnd.SIGNAL_COLUMNS)
    meta = run.ranks
    same = run.same_name

    def slower(rank: int) -> list[dict]:
        if same.empty:
            return []
        med = same.pivot_table(index="name", columns="rank", values="median_us")
        return fnd.slower_than_others(med, rank)

    panes = {
        "overview": overview(None, b),
        "operators": Pane(PANE_TITLES["operators"]),
        "kernels": Pane(PANE_TITLES["kernels"]),
        "memory": Pane(PANE_TITLES["memory"], missing={"peaks": SUMMARY_ONLY}),
        "distributed": Pane(PANE_TITLES["distributed"]),
    }
    if len(run.top_ops):
        panes["operators"].tables["top_ops"] = run.top_ops.head(top)
    if len(run.top_kernels):
        panes["kernels"].tables["top_kernels"] = run.top_kernels.head(top)
    for name in ("launched_by", "durations", "launches"):
        panes["kernels"].missing[name] = SUMMARY_ONLY
    dist = panes["distributed"]
    if len(b):
        dist.tables["rank_steps"] = steps.reset_index()
        dist.tables["stragglers"] = run.stragglers
        dist.tables["comm_overlap"] = run.overlap
    if len(run.comm):
        dist.tables["collectives"] = run.comm
    dist.missing["skew"] = SUMMARY_ONLY
    facts = {
        "ranks": sorted(int(r) for r in meta),
        "world_size": fnd.world_size(meta) if meta else None,
        "events": int(sum(m.get("events", 0) for m in meta.values())),
        "devices": [],
        "sources": sorted(str(p) for m in meta.values() for p in m.get("sources", []))[:8],
        "kind": ",".join(sorted(set(b["kind"]))) if len(b) else None,
        "steps": sorted(int(s) for s in np.unique(b["step"].to_numpy())) if len(b) else [],
    }
    found = fnd.find_in(b, steps, sig, meta, None, slower)
    return Report(facts, found, panes, None, b)
