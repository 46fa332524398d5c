"""Summaries on disk: one ``.npz`` per rank (columns as plain arrays), a run's CSVs and plots.

No pickles: a summary file holds numpy arrays (text as unicode arrays), each table's column
names and dtypes, and the metadata as JSON, so it reads back to the same numbers and dtypes.
``summaries/rank-<r>.npz`` lie beside a run's tables.

>>> from hpcprof_kit.traces.reporting.summary_store import read_summary, write_summary   # doctest: +SKIP
>>> read_summary(write_summary(summary, "runs/x/summaries")).rank               # doctest: +SKIP
3
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hpcprof_kit.errors import TraceFormatError

if TYPE_CHECKING:  # pragma: no cover
    from hpcprof_kit.traces.view.summary import RankSummary, RunSummary

TABLES = ("breakdown", "ops", "kernels", "comm", "same")
OPTIONAL = (
    "signals",
    "waits",
    "startup",
)  # written when present; an older summary reads without them


def write_summary(summary: RankSummary, folder: str | os.PathLike[str]) -> Path:
    """Store ``summary`` as ``<folder>/rank-<rank>.npz`` (uncompressed numpy columns, the
    metadata as JSON); returns the file. Written aside, then renamed.

    >>> write_summary(s, "runs/x/summaries")          # doctest: +SKIP
    PosixPath('runs/x/summaries/rank-3.npz')
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {"__meta__": np.array(json.dumps(_meta(summary)))}
    for name in TABLES + OPTIONAL:
        table = getattr(summary, name)
        if table is None:
            continue
        arrays[f"{name}/__columns__"] = np.array(list(table.columns), dtype=str)
        arrays[f"{name}/__dtypes__"] = np.array([str(t) for t in table.dtypes], dtype=str)
        for col in table.columns:
            values = table[col].to_numpy()
            arrays[f"{name}/{col}"] = values.astype(str) if values.dtype == object else values
    path = folder / f"rank-{summary.rank}.npz"
    part = path.with_name(path.name + ".part")
    with part.open("wb") as fh:
        np.savez(fh, **arrays)
    os.replace(part, path)
    return path


def _meta(summary: RankSummary) -> dict[str, Any]:
    return {"rank": summary.rank, **summary.meta}


def read_summary(path: str | os.PathLike[str]) -> RankSummary:
    """A summary written by :func:`write_summary`.

    >>> read_summary("runs/x/summaries/rank-3.npz").rank   # doctest: +SKIP
    3
    """
    import pandas as pd

    try:
        with np.load(path, allow_pickle=False) as npz:
            meta = json.loads(str(npz["__meta__"]))
            tables = {}
            for name in TABLES + OPTIONAL:
                if name in OPTIONAL and f"{name}/__columns__" not in npz.files:
                    continue
                cols = [str(c) for c in npz[f"{name}/__columns__"]]
                dtypes = [str(t) for t in npz[f"{name}/__dtypes__"]]
                data = {
                    c: _column(npz[f"{name}/{c}"], t) for c, t in zip(cols, dtypes, strict=True)
                }
                tables[name] = pd.DataFrame(data, columns=cols)
    except (OSError, KeyError, ValueError) as exc:
        raise TraceFormatError(
            f"{path} is not a rank summary written by write_summary ({exc}); summarise the "
            "rank's trace again"
        ) from exc
    from hpcprof_kit.traces.view.summary import RankSummary

    return RankSummary(meta.pop("rank"), meta, **tables)


def _column(values: np.ndarray, dtype: str):
    import pandas as pd

    if values.dtype.kind == "U":
        return pd.Series(values.astype(object), dtype=dtype)
    return pd.Series(values, dtype=dtype)


def write_tables(run: RunSummary, folder: str | os.PathLike[str]) -> list[Path]:
    """Each table as ``<folder>/<name>.csv``; returns the files written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in run.tables().items():
        path = folder / f"{name}.csv"
        table.to_csv(path, index=False)
        written.append(path)
    if run.failures:
        path = folder / "failures.json"
        path.write_text(json.dumps(run.failures, indent=1) + "\n")
        written.append(path)
    return written


def write_plots(run: RunSummary, folder: str | os.PathLike[str]) -> list[Path]:
    """The rank heatmap (or step bands) and the breakdown spread as PNG files."""
    import matplotlib

    matplotlib.use("Agg")
    from hpcprof_kit.traces.plots.charts import plot_rank_heatmap
    from hpcprof_kit.traces.plots.spread import plot_breakdown_spread

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if run.breakdown.empty:
        return []
    out = [folder / "rank_heatmap.png", folder / "breakdown_spread.png"]
    plot_rank_heatmap(run.steps).save(str(out[0]))
    plot_breakdown_spread(run.breakdown).save(str(out[1]))
    return out
