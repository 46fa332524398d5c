"""One report of a run: the panes TensorBoard's profiler plugin had, and what looks wrong.

:func:`report` reads a run (a trace table, or the path of a run directory, a traces folder
or trace files) and returns a :class:`Report`:

- ``time_lost``: the what-if account (:mod:`hpcprof_kit.traces.view.time_lost`): the run's
  time, how much of it was lost against its own ideal step, and where it went, per step and
  per rank;
- ``findings``: what looks wrong, each with its number, threshold, evidence, its cost to the
  run (``lost_ms``) and what to try (:mod:`hpcprof_kit.traces.findings` documents the
  vocabulary);
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces import findings as fnd
from hpcprof_kit.traces.analyses.breakdown import bare
from hpcprof_kit.traces.reporting.distributed import (  # noqa: F401  (the panes, named here too)
    collectives,
    distributed,
    memory,
    straggler_kernels,
)
from hpcprof_kit.traces.reporting.kernels import (  # noqa: F401
    kernel_durations,
    kernels,
    launch_table,
    launched_by,
    operators,
)
from hpcprof_kit.traces.reporting.overview import (  # noqa: F401
    KNOWN_CATS,
    categories,
    comm_transfer_and_wait,
    idle_by_stream,
    overview,
    per_step_view,
)
from hpcprof_kit.traces.reporting.pane import (  # noqa: F401
    PANE_TITLES,
    PANES,
    SUMMARY_ONLY,
    Pane,
    tidy,
    tidy_table,
)
from hpcprof_kit.traces.table.distinct import distinct
from hpcprof_kit.traces.view.run_view import RunView

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass
class Report:
    """What :func:`report` returns; see the module docstring."""

    run: dict[str, Any]
    findings: list[dict[str, Any]]
    panes: dict[str, Pane]
    table: pd.DataFrame | None = field(default=None, repr=False)  # the trace table
    breakdown: pd.DataFrame | None = field(default=None, repr=False)  # its step_breakdown
    # the what-if account (hpcprof_kit.traces.view.time_lost.TimeLost)
    time_lost: Any = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """``{"run", "time_lost", "findings", "panes": {name: {"title", "tables", "notes",
        "missing"}}}`` with every table as a list of row dicts (NaN as null): what ``--json``
        prints."""
        return {
            "run": self.run,
            "time_lost": self.time_lost.to_dict() if self.time_lost is not None else None,
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
        """The plots of one pane, drawn now (name -> :class:`~hpcprof_kit.traces.plots.figure.Plot`)."""
        from hpcprof_kit.traces.plots.report import pane_figures

        return pane_figures(self, pane)

    def write_html(self, path: str | Path, *, force: bool = False) -> Path:
        """One HTML file with every pane, its tables and its plots inline; opens offline."""
        from hpcprof_kit.traces.reporting.html import write_html

        return write_html(self, Path(path), force=force)

    def show(self):
        """In JupyterLab: the findings, then a tab per pane (ipywidgets)."""
        from hpcprof_kit.widgets.report import report_tabs

        return report_tabs(self)

    def _repr_html_(self) -> str:
        from hpcprof_kit.traces.reporting.html import findings_html, time_lost_html

        return time_lost_html(self.time_lost) + findings_html(self.findings, self.run)


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
        from hpcprof_kit.traces.table.loader import load

        df = load(data)
    if len(df) == 0:
        raise TraceFormatError(
            "the trace table is empty, so there is nothing to report; check the run's traces "
            "folder (hpcprof-kit traces summary RUN says what each file held)"
        )
    facts = run_facts(df)
    view = RunView.of(df)  # prepared once; every pane and every rule reads it
    b = view.b
    panes = {
        "overview": overview(view),
        "operators": operators(view, top),
        "kernels": kernels(view, top),
        "memory": memory(view),
        "distributed": distributed(view),
    }
    facts["kind"] = ",".join(sorted(set(b["kind"]))) if len(b) else None
    facts["steps"] = sorted(int(s) for s in np.unique(b["step"].to_numpy())) if len(b) else []
    found = fnd.find(view)
    return Report(facts, found, tidy(panes), df, b, view.time_lost)


def run_facts(df: pd.DataFrame) -> dict[str, Any]:
    """What the run is: ranks, world size, events, devices, the files read (the report adds
    the trace's kind and steps)."""
    meta = df.attrs.get("ranks", {})
    return {
        "ranks": sorted(int(r) for r in distinct(bare(df)["rank"].to_numpy())),
        "world_size": fnd.world_size(meta) if meta else None,
        "events": int(len(df)),
        "devices": sorted(
            {str(p.get("name")) for m in meta.values() for p in (m.get("device_properties") or [])}
        ),
        "sources": sorted(str(m.get("source")) for m in meta.values() if m.get("source"))[:8],
    }


def report_from_summary(run, top: int = 20) -> Report:
    """The report of a run from its per-rank summaries (:class:`~hpcprof_kit.traces.view.summary.
    RunSummary`, what ``hpcprof-kit traces report PATH --mpi`` gathers on MPI rank 0): the
    same findings with the same numbers as :func:`report` of the whole table (their evidence
    lacks what needs the events: the host ops during device idle, the sync calls by name),
    and the panes a summary can fill; the others say so."""
    view = RunView.of_summary(run)  # prepared once; the overview pane and every rule read it
    b, steps, meta = view.b, view.steps, view.meta
    panes = {
        "overview": overview(view),
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
    found = fnd.find(view)
    return Report(facts, found, tidy(panes), None, b, view.time_lost)
