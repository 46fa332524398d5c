"""One comparison of a sweep's variants: a row each, written as ``comparison.csv``.

Per variant: the values it varied, its state, its step time (median and the p10-p90 spread
over every rank's timed steps, the numbers of :func:`hpcprof_kit.comparison.compare_variants`
and the same median as the run's own ``timing_summary``), the shares of a step spent computing,
communicating, waiting on exposed communication and idle (from its traces'
:func:`~hpcprof_kit.traces.step_breakdown` when it recorded traces, else from its timings,
which cannot tell exposed communication apart), and its throughput where the app's timing
JSON gives the work per step. A variant whose median lies outside the spread of both its
neighbours (in grid order), and stands apart from them, is flagged as an outlier.

>>> from hpcprof_kit.jobs.sweep_compare import outliers
>>> outliers([10, 11, 30, 12], [9, 10, 29, 11], [11, 12, 31, 13])
[False, False, True, False]
>>> outliers([10, 20, 30], [9, 19, 29], [11, 21, 31])  # a trend: no outlier
[False, False, False]
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcprof_kit.errors import KitError, SpecError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hpcprof_kit.traces.plots.figure import Plot

COMPARISON = "comparison.csv"
SHARES = ("compute_share", "comm_share", "exposed_comm_share", "idle_share")
NAN = float("nan")


def all_timings(run_dirs: Sequence[Path]) -> dict[str, pd.DataFrame]:
    """The timing table of each run that wrote timings, by run directory name (one
    :func:`hpcprof_kit.timing.load_timings` over them all: a table per run would cost more
    than the comparison itself)."""
    from hpcprof_kit.timing import load_timings

    written = [d for d in run_dirs if any((d / "timings").glob("*.json"))]
    if not written:
        return {}
    table = load_timings(written)
    return {str(run): part for run, part in table.groupby("run", observed=True)}


def shares_from_traces(run_dir: Path) -> dict[str, float] | None:
    """Breakdown shares of the run's traces (summed over ranks and steps); None without any."""
    folder = run_dir / "traces"
    if not folder.is_dir() or not any(folder.iterdir()):
        return None
    from hpcprof_kit.traces import load, step_breakdown

    bd = step_breakdown(load(run_dir))
    wall = float(bd["wall_ns"].sum()) if not bd.empty else 0.0
    if wall <= 0:
        return None
    part = {p: float(bd[f"{p}_ns"].sum()) / wall for p in ("compute", "hidden_comm",
                                                            "exposed_comm", "idle")}  # fmt: skip
    return {"compute_share": part["compute"],
            "comm_share": part["hidden_comm"] + part["exposed_comm"],
            "exposed_comm_share": part["exposed_comm"], "idle_share": part["idle"]}  # fmt: skip


def shares_from_timings(table: pd.DataFrame) -> dict[str, float]:
    """Compute, comm and other time of a run's timing table as shares of its step time: the
    shares of :func:`hpcprof_kit.timing.compute_vs_comm` (whose means over ranks and steps have
    these ratios), summed by kind at once, as a 64-variant sweep would otherwise wait on 64
    pivots.

    >>> import pandas as pd
    >>> t = pd.DataFrame({"kind": ["compute", "comm", "total"], "seconds": [0.6, 0.3, 1.0]})
    >>> {k: round(v, 2) for k, v in shares_from_timings(t).items() if v == v}
    {'compute_share': 0.6, 'comm_share': 0.3, 'idle_share': 0.1}
    """
    sums = table.groupby("kind", observed=True)["seconds"].sum()
    compute, comm = float(sums.get("compute", 0.0)), float(sums.get("comm", 0.0))
    step = float(sums.get("total", 0.0)) or compute + comm
    if step <= 0:
        return dict.fromkeys(SHARES, NAN)
    return {"compute_share": compute / step, "comm_share": comm / step,
            "exposed_comm_share": NAN, "idle_share": max(step - compute - comm, 0.0) / step}  # fmt: skip


def throughput(record: dict[str, Any], median_ms: float) -> tuple[float, str]:
    """Work per second from the app's parameters: samples (train) or tokens (seqpar).

    >>> throughput({"world_size": 2, "params": {"batch_size": 8}}, 100.0)
    (160.0, 'samples/s')
    """
    params = record.get("params") or {}
    if not median_ms or not math.isfinite(median_ms):
        return NAN, ""
    if "batch_size" in params:
        return params["batch_size"] * record.get("world_size", 1) * 1e3 / median_ms, "samples/s"
    if "seq_len" in params:
        return params["seq_len"] * 1e3 / median_ms, "tokens/s"
    return NAN, ""


def outliers(median: Sequence[float], p10: Sequence[float], p90: Sequence[float]) -> list[bool]:
    """A variant is an outlier when its median lies outside the spread (p10-p90) of both
    neighbours in grid order (above both p90s or below both p10s) and further from their
    midpoint than they are from each other: a spike or a dip, not a step of a trend. The first
    and last variants have one neighbour, which cannot tell the two apart: never flagged."""
    flags = []
    for i, m in enumerate(median):
        if i == 0 or i == len(median) - 1:
            flags.append(False)
            continue
        a, b = i - 1, i + 1
        if not all(math.isfinite(x) for x in (m, median[a], median[b])):
            flags.append(False)
            continue
        outside = m > max(p90[a], p90[b]) or m < min(p10[a], p10[b])
        apart = abs(m - (median[a] + median[b]) / 2) > abs(median[a] - median[b])
        flags.append(bool(outside and apart))
    return flags


def variant_row(sweep: Any, entry: dict[str, Any],
                timings: pd.DataFrame | None) -> tuple[dict[str, Any], list[float]]:  # fmt: skip
    """One variant's row (without the spread) and its step samples (ms, every rank's)."""
    assert sweep.path is not None
    row: dict[str, Any] = {"variant": entry["index"], **entry["values"],
                           "state": entry.get("state", "NEW"), "run_dir": entry.get("run_dir")}  # fmt: skip
    row.update(dict.fromkeys(SHARES, NAN), breakdown_from="", throughput=NAN, throughput_unit="")
    if timings is None:  # a variant that did not complete: its row says its state only
        return row, []
    run_dir = sweep.path / entry["run_dir"]
    try:
        found = shares_from_traces(run_dir)
    except KitError:
        found = None
    row.update(found or shares_from_timings(timings))
    row["breakdown_from"] = "traces" if found else "timings"
    first = next(iter(sorted((run_dir / "timings").glob("*.json"))))
    row["_record"] = json.loads(first.read_text())
    steps = timings.loc[timings["kind"] == "total", "seconds"] * 1e3
    return row, [float(x) for x in steps]


def compare_sweep(sweep: Any, write: bool = True) -> pd.DataFrame:
    """The sweep's table, a row per variant; also written as ``comparison.csv``."""
    import numpy as np
    import pandas as pd

    from hpcprof_kit.comparison import MIN_SAMPLES, compare_variants

    if sweep.path is None:
        raise SpecError("this sweep has not run yet; call run() first, then compare()")
    sweep.refresh()
    entries = sweep.record()["variants"]
    # Only a variant that completed has timings to show: a failed or cut-short one may have
    # written some steps before it ended, which would read as its step time.
    done = [e for e in entries if e.get("run_dir") and e.get("state") == "COMPLETED"]
    tables = all_timings([sweep.path / e["run_dir"] for e in done])
    rows, samples = [], {}
    for entry in entries:
        own = tables.get(entry.get("run_dir") or "") if entry in done else None
        row, steps = variant_row(sweep, entry, own)
        rows.append(row)
        if len(steps) >= MIN_SAMPLES:
            samples[str(row["variant"])] = steps  # compare_variants names variants by text
    table = pd.DataFrame(rows).set_index("variant")
    stats = compare_variants(samples) if samples else pd.DataFrame()
    for col in ("n", "median", "p10", "p90", "spread", "ratio"):
        values = stats[col] if col in stats else pd.Series(dtype=float)
        name = col if col in ("n", "ratio") else f"step_{col}_ms"
        table[name] = values.reindex(table.index.astype(str)).to_numpy(dtype=float)
    table["n"] = table["n"].fillna(0).astype(int)
    for v in table.index:
        record = table.at[v, "_record"] if "_record" in table else None
        if isinstance(record, dict):
            rate, unit = throughput(record, table.at[v, "step_median_ms"])
            table.at[v, "throughput"], table.at[v, "throughput_unit"] = rate, unit
    table = table.drop(columns=["_record"], errors="ignore")
    table["outlier"] = outliers(*(table[f"step_{c}_ms"].to_numpy(dtype=float)
                                  for c in ("median", "p10", "p90")))  # fmt: skip
    ordered = [*sweep.grid, "state", "n", "step_median_ms", "step_p10_ms", "step_p90_ms",
               "step_spread_ms", "ratio", *SHARES, "breakdown_from", "throughput",
               "throughput_unit", "outlier", "run_dir"]  # fmt: skip
    table = table[ordered]
    table.attrs.update(sweep=str(sweep.path), baseline=stats.attrs.get("baseline"))
    if write:
        table.replace({np.nan: None}).to_csv(sweep.path / COMPARISON)
    return table


def step_samples(sweep: Any) -> dict[str, list[float]]:
    """Each completed variant's step times in ms (every rank's timed steps), by its label:
    what :func:`hpcprof_kit.comparison.compare_variants` and ``noise_verdict`` read, the first
    variant the baseline."""
    if sweep.path is None:
        raise SpecError("this sweep has not run yet; call run() first, then step_samples()")
    sweep.refresh()
    done = [e for e in sweep.record()["variants"]
            if e.get("run_dir") and e.get("state") == "COMPLETED"]  # fmt: skip
    tables = all_timings([sweep.path / e["run_dir"] for e in done])
    samples = {}
    for entry in done:
        table = tables.get(entry["run_dir"])
        if table is not None:
            steps = table.loc[table["kind"] == "total", "seconds"] * 1e3
            samples[entry["label"]] = [float(x) for x in steps]
    return samples


def ladder(table: pd.DataFrame) -> pd.DataFrame:
    """Each rung's gain over the previous: ``speedup`` (previous median / this one) and the
    milliseconds saved, for sweeps that change one field at a time, in grid order."""
    varied = [c for c in table.columns if c not in _NOT_FIELDS]
    if len(varied) != 1:
        raise SpecError(
            f"a ladder needs a sweep that varies one field, in the order of its rungs; this "
            f"one varies {varied}: sweep one field (e.g. sweep(**{{'--compile': [False, True]}}))"
        )
    out = table[[varied[0], "state", "step_median_ms", "step_p10_ms", "step_p90_ms"]].copy()
    previous = out["step_median_ms"].shift(1)
    out["speedup"] = (previous / out["step_median_ms"]).round(3)
    out["saved_ms"] = previous - out["step_median_ms"]
    out["vs_first"] = (out["step_median_ms"].iloc[0] / out["step_median_ms"]).round(3)
    return out


_NOT_FIELDS = {"state", "n", "step_median_ms", "step_p10_ms", "step_p90_ms", "step_spread_ms",
               "ratio", *SHARES, "breakdown_from", "throughput", "throughput_unit", "outlier",
               "run_dir"}  # fmt: skip


def plot_sweep(table: pd.DataFrame) -> Plot:
    """Step time per variant: the median as a point, the p10-p90 spread as its bar; outliers
    drawn in red. Returns the figure and the table it draws."""
    import matplotlib.pyplot as plt
    import numpy as np

    from hpcprof_kit.traces.plots.figure import Plot

    shown = table[["step_median_ms", "step_p10_ms", "step_p90_ms", "outlier", "state"]]
    labels = [" ".join(f"{_short(c)}={table.at[i, c]}" for c in table.columns
                       if c not in _NOT_FIELDS) + _unless_completed(table.at[i, "state"])
              for i in table.index]  # fmt: skip
    x = np.arange(len(shown))
    med = shown["step_median_ms"].to_numpy(dtype=float)
    err = np.vstack([med - shown["step_p10_ms"].to_numpy(dtype=float),
                     shown["step_p90_ms"].to_numpy(dtype=float) - med])  # fmt: skip
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(x) + 2), 3.5))
    colours = ["tab:red" if o else "tab:blue" for o in shown["outlier"]]
    ax.errorbar(x, med, yerr=np.nan_to_num(err), fmt="none", ecolor="grey", capsize=4)
    ax.scatter(x, med, c=colours, zorder=3)
    ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("step time (ms), median and p10-p90")
    ax.set_title("step time per variant (red: outside its neighbours' spread)")
    fig.tight_layout()
    plt.close(fig)
    return Plot(fig, shown.assign(label=labels))


def _unless_completed(state: str) -> str:
    """A variant with no step time says why under its tick (``(NOT_STARTED)``, ``(FAILED)``).

    >>> _unless_completed("COMPLETED"), _unless_completed("NOT_STARTED")
    ('', '\\n(NOT_STARTED)')
    """
    return "" if state == "COMPLETED" else f"\n({state})"


def _short(column: str) -> str:
    return column.lstrip("-")
