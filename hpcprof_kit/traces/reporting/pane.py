"""What a report's pane is: its tables, notes and what it could not show (:class:`Pane`), each
built from the run's prepared view (:class:`~hpcprof_kit.traces.view.run_view.RunView`);
:func:`tidy` puts every pane in one unit (ms) and rounds it as it is read.
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
