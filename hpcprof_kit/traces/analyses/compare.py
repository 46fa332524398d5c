"""Two runs side by side (e.g. eager vs compiled): per-op and per-step differences."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprof_kit.errors import SpecError
from hpcprof_kit.traces.analyses.breakdown import PARTS, step_breakdown
from hpcprof_kit.traces.analyses.ops import top_kernels, top_ops
from hpcprof_kit.traces.table.order import by_value

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

_ALL = 1_000_000  # "every name" for the top tables


def _check_labels(labels: tuple[str, str]) -> tuple[str, str]:
    if len(labels) != 2 or labels[0] == labels[1] or not all(isinstance(x, str) for x in labels):
        raise SpecError(
            f"labels={labels!r} must be two different strings, one per run; "
            "pass e.g. labels=('eager', 'compiled')"
        )
    return labels[0], labels[1]


def _names(a: pd.DataFrame, b: pd.DataFrame, la: str, lb: str) -> pd.DataFrame:
    import pandas as pd

    parts = []
    for kind, top in (("op", top_ops), ("kernel", top_kernels)):
        ta, tb = top(a, n=_ALL), top(b, n=_ALL)
        if ta.empty and tb.empty:
            continue
        cols = ["count", "total_ms", "self_ms"]
        joined = ta[cols].add_suffix(f"_{la}").join(tb[cols].add_suffix(f"_{lb}"), how="outer")
        joined = joined.fillna(0.0)
        joined.index.name = "name"
        joined.insert(0, "kind", kind)
        parts.append(joined)
    if not parts:
        return pd.DataFrame(columns=["kind", f"self_ms_{la}", f"self_ms_{lb}", "self_diff_ms"])
    table = pd.concat(parts)
    table["self_diff_ms"] = table[f"self_ms_{lb}"] - table[f"self_ms_{la}"]
    table["self_ratio"] = table[f"self_ms_{lb}"] / table[f"self_ms_{la}"].where(
        table[f"self_ms_{la}"] > 0
    )
    table = table.reset_index()
    table = by_value(table, "self_diff_ms", magnitude=True, names=("kind", "name"))
    return table.set_index("name")


def _steps(a: pd.DataFrame, b: pd.DataFrame, la: str, lb: str) -> pd.DataFrame:
    """Mean over ranks of each step's wall time and parts, both runs, plus a ``mean`` row."""
    parts = ["wall", *PARTS]
    sides = []
    for df, label in ((a, la), (b, lb)):
        bd = step_breakdown(df)
        ms = bd.groupby("step")[[f"{p}_ns" for p in parts]].mean() / 1e6
        ms.loc["mean"] = ms.mean()
        ms.columns = [f"{p}_ms_{label}" for p in parts]
        sides.append(ms)
    table = sides[0].join(sides[1], how="outer")
    table["wall_diff_ms"] = table[f"wall_ms_{lb}"] - table[f"wall_ms_{la}"]
    table["speedup"] = table[f"wall_ms_{la}"] / table[f"wall_ms_{lb}"]
    table.index.name = "step"
    return table


def compare_runs(
    a: pd.DataFrame, b: pd.DataFrame, labels: tuple[str, str] = ("eager", "compiled")
) -> pd.DataFrame:
    """Per-name differences between two runs; per-step differences in ``.attrs["steps"]``.

    Rows are ops and kernels (column ``kind``) with count, total and self time of each run,
    ``self_diff_ms`` (second minus first) and ``self_ratio``, largest changes first. The steps
    table holds each step's wall time and parts (mean over ranks) of both runs, the difference
    and the speedup (first / second), with a ``mean`` row.

    >>> from hpcprof_kit import traces                           # doctest: +SKIP
    >>> diff = traces.compare_runs(traces.load("runs/eager"), traces.load("runs/compiled"))  # doctest: +SKIP
    >>> diff.attrs["steps"].loc["mean", "speedup"]                # doctest: +SKIP
    """
    la, lb = _check_labels(tuple(labels))
    table = _names(a, b, la, lb)
    table.attrs["labels"] = (la, lb)
    table.attrs["steps"] = _steps(a, b, la, lb)
    return table
