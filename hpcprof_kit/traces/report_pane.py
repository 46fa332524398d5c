"""What a report's pane is, and the prepared view of a run every pane reads.

The view is built once per report (:class:`RunView`): the trace table without its metadata,
its step breakdown and its rank x step table; each pane reads it instead of preparing the
table again. :func:`tidy` puts every pane in one unit (ms) and rounds it as it is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
SUMMARY_ONLY = "not kept in the per-rank summaries of an --mpi report; run it in one process"


@dataclass
class Pane:
    """One pane: its tables by name, notes to read them by, and what it could not show."""

    title: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)  # table -> why it is not there


@dataclass
class RunView:
    """A run prepared once for the panes: ``df`` the trace table without its metadata (None
    for a report of per-rank summaries), ``table`` the table as loaded (its metadata names
    the files memory events are read from), ``breakdown`` its step breakdown and ``steps``
    the rank x step table (:func:`~hpcprof_kit.traces.breakdown.rank_steps`).

    >>> import json, tempfile, pathlib
    >>> from hpcprof_kit import traces
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t-0-of-1.json"
    >>> _ = p.write_text(json.dumps({"traceEvents": [
    ...     {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1,
    ...      "ts": 0, "dur": 100}, {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,
    ...      "tid": 1, "ts": 10, "dur": 50}]}))
    >>> view = RunView.of(traces.load(p, cache=False))
    >>> view.breakdown[["rank", "step"]].values.tolist(), view.steps.index.tolist(), view.df.attrs
    ([[0, 3]], [3], {})
    """

    df: pd.DataFrame | None
    table: pd.DataFrame | None
    breakdown: pd.DataFrame
    steps: pd.DataFrame

    @classmethod
    def of(cls, table: pd.DataFrame) -> RunView:
        from hpcprof_kit.traces import breakdown as bd

        # the analyses need no metadata: pandas would copy it at every step
        df = bd.bare(table)
        b = bd.step_breakdown(df)
        return cls(df, table, b, bd.rank_steps(b))


# a table's unit suffix -> the factor to ms: every pane reads in ms
_TO_MS = {"_ns": 1e-6, "_us": 1e-3}


def tidy(panes: dict[str, Pane]) -> dict[str, Pane]:
    """Every pane in one unit and rounded as a reader reads it: times in ms to the µs (3
    decimals), percentages to 1 decimal (a 0-1 ``share`` becomes ``share_pct``), ratios
    to 3 decimals. The analyses behind the panes keep their exact ns."""
    for pane in panes.values():
        pane.tables = {name: tidy_table(t) for name, t in pane.tables.items()}
    return panes


def tidy_table(table: pd.DataFrame) -> pd.DataFrame:
    """One table in ms, rounded (see :func:`tidy`).

    >>> import pandas as pd
    >>> tidy_table(pd.DataFrame({"idle_ns": [201615431], "mean_us": [12.34567],
    ...                          "share": [0.123456], "ratio": [1.23456]}))
       idle_ms  mean_ms  share_pct  ratio
    0  201.615    0.012       12.3  1.235
    """
    import numpy as np
    import pandas as pd

    # built as a new frame from whole columns: setting a rank x step table's 70 columns one
    # by one cost pandas more than the rest of the pane
    data: dict[Any, Any] = {}
    for col in table.columns:
        name, values = str(col), table[col]
        if name[-3:] in _TO_MS and _numeric(values):
            col, values = name[:-3] + "_ms", values.to_numpy(dtype=float) * _TO_MS[name[-3:]]
        elif name == "share" and _numeric(values):
            col, values = "share_pct", values.to_numpy(dtype=float) * 100
        if np.asarray(values).dtype.kind == "f":
            places = 1 if str(col).endswith("_pct") else 3
            # + 0.0 turns the -0.0 of a rounded -2 ns into 0.0
            values = np.round(np.asarray(values, dtype=float), places) + 0.0
        data[col] = values.to_numpy() if isinstance(values, pd.Series) else values
    out = pd.DataFrame(data, index=table.index)
    out.columns.name = table.columns.name
    return out


def _numeric(column: pd.Series) -> bool:
    return column.dtype.kind in "iufb"
