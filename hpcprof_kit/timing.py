"""Timings of the example apps: per-rank timing JSON -> one tidy table -> summaries and plots.

Each app rank writes ``timings/<app>-<rank>-of-<world>.json`` (layout in docs/architecture.md,
"Timing JSON"). ``load_timings`` reads the files of one or many run directories into a table
with one row per (run, rank, op, iteration); ``timing_summary`` and ``compute_vs_comm`` turn it
into the numbers of the capstone (float32 vs bfloat16, 1 vs 2 ranks or nodes).

>>> from hpcprof_kit import timing                                  # doctest: +SKIP
>>> t = timing.load_timings(["runs/seqpar_local_N1_R1_...", "runs/seqpar_local_N1_R2_..."])  # doctest: +SKIP
>>> timing.compute_vs_comm(t)                                       # doctest: +SKIP
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from hpcprof_kit.errors import SpecError, TraceFormatError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hpcprof_kit.traces.plots.figure import Plot

# Operation names that are communication; everything else an app times is compute, except the
# whole-iteration totals. Extend COMM_OPS for a new app's collectives.
COMM_OPS = ("all_gather", "reduce_scatter", "all_reduce", "allreduce", "broadcast", "all_to_all")
TOTAL_OPS = ("step", "iteration", "total")
REQUIRED = ("app", "rank", "world_size", "dtype", "timings")
COLUMNS = [
    "run",
    "app",
    "rank",
    "world_size",
    "nodes",
    "dtype",
    "device",
    "op",
    "kind",
    "iteration",
    "seconds",
]
CONFIG = ["app", "dtype", "world_size", "nodes"]


def op_kind(op: str) -> str:
    """``comm``, ``total`` or ``compute`` for an operation name.

    >>> [op_kind(o) for o in ("all_gather", "matmul_1", "step")]
    ['comm', 'compute', 'total']
    """
    if op in TOTAL_OPS:
        return "total"
    return "comm" if any(op.startswith(c) for c in COMM_OPS) else "compute"


def timing_files(paths: str | os.PathLike | list) -> list[Path]:
    """The timing JSON files under run directories, ``timings/`` folders, files or globs."""
    items = paths if isinstance(paths, (list, tuple)) else [paths]
    found: list[Path] = []
    for item in items:
        text = str(item)
        matches = (
            [Path(m) for m in sorted(glob.glob(text))] if glob.has_magic(text) else [Path(text)]
        )
        for path in matches:
            if path.is_dir():
                folder = path / "timings" if (path / "timings").is_dir() else path
                found += sorted(folder.glob("*.json"))
            elif path.is_file():
                found.append(path)
        if not matches or not any(p.exists() for p in matches):
            raise SpecError(
                f"paths={text!r} matches no file or folder; pass a run directory, its timings/ "
                "folder, a timing JSON file or a glob"
            )
    if not found:
        raise SpecError(
            f"paths={items!r} hold no timing JSON (*.json); did the app run with "
            "$HPCPROF_RUN_DIR or --timings-dir set?"
        )
    return found


def _run_label(path: Path) -> str:
    folder = path.parent
    return folder.parent.name if folder.name == "timings" else folder.name


def _read(path: Path) -> dict:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise TraceFormatError(
            f"timing file {path.name} is not readable JSON ({exc}); re-run the app"
        ) from exc
    missing = [k for k in REQUIRED if k not in record]
    if missing or not isinstance(record.get("timings"), dict):
        raise TraceFormatError(
            f"timing file {path.name} lacks field(s) {missing or ['timings (a mapping)']}; it must "
            "follow the 'Timing JSON' layout of docs/architecture.md"
        )
    return record


def load_timings(paths: str | os.PathLike | list) -> pd.DataFrame:
    """One tidy row per (run, rank, op, iteration) with the duration in seconds.

    >>> from hpcprof_kit.timing import load_timings          # doctest: +SKIP
    >>> load_timings("runs/seqpar_local_N1_R2_20260101-120000").head()  # doctest: +SKIP
    """
    import pandas as pd

    rows = []
    for path in timing_files(paths):
        rec = _read(path)
        run = _run_label(path)
        for op, values in rec["timings"].items():
            kind = op_kind(op)
            for i, seconds in enumerate(values):
                rows.append(
                    (run, rec["app"], int(rec["rank"]), int(rec["world_size"]), int(rec.get("nodes", 1)),
                     rec["dtype"], rec.get("device", "?"), op, kind, i, float(seconds))
                )  # fmt: skip
    table = pd.DataFrame(rows, columns=COLUMNS)
    for col in ("run", "app", "dtype", "device", "op", "kind"):
        table[col] = table[col].astype("category")
    return table


def timing_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per app x op x dtype x ranks x nodes: samples, mean, median, min, max and std in ms.

    >>> from hpcprof_kit import timing                       # doctest: +SKIP
    >>> timing.timing_summary(timing.load_timings("runs/x")) # doctest: +SKIP
    """
    _require(table)
    ms = table.assign(ms=table["seconds"] * 1e3)
    g = ms.groupby([*CONFIG, "op", "kind"], observed=True)["ms"]
    out = g.agg(
        samples="size", mean_ms="mean", median_ms="median", min_ms="min", max_ms="max", std_ms="std"
    )
    return out.reset_index()


def compute_vs_comm(table: pd.DataFrame) -> pd.DataFrame:
    """Per configuration (app, dtype, ranks, nodes): compute, comm and the rest of a step (ms).

    Per rank and iteration the compute ops and the comm ops are summed; ``other`` is the step
    time not covered by them. Values are the mean over ranks and iterations; ``comm_share`` is
    comm / step.

    >>> from hpcprof_kit import timing                        # doctest: +SKIP
    >>> timing.compute_vs_comm(timing.load_timings("runs/"))  # doctest: +SKIP
    """
    import pandas as pd

    _require(table)
    keys = [*CONFIG, "run", "rank", "iteration"]
    per = table.pivot_table(
        index=keys, columns="kind", values="seconds", aggfunc="sum", observed=True
    )
    per = per.reindex(columns=["compute", "comm", "total"], fill_value=0.0).fillna(0.0) * 1e3
    per["step"] = per["total"].where(per["total"] > 0, per["compute"] + per["comm"])
    per["other"] = (per["step"] - per["compute"] - per["comm"]).clip(lower=0)
    out = per.groupby(CONFIG, observed=True)[["compute", "comm", "other", "step"]].mean()
    out.columns = [f"{c}_ms" for c in out.columns]
    out["comm_share"] = out["comm_ms"] / out["step_ms"]
    return pd.DataFrame(out).reset_index()


def _require(table: pd.DataFrame) -> None:
    missing = [
        c for c in ("op", "kind", "seconds", *CONFIG) if c not in getattr(table, "columns", ())
    ]
    if missing:
        raise SpecError(
            f"table lacks columns {missing}; build it with hpcprof_kit.timing.load_timings(path)"
        )


# Bars that differ more than this many times no longer share one axis: the small ones vanish.
SHARED_AXIS_MAX_RATIO = 10.0
PARTS = (("compute", "compute"), ("comm", "comm"), ("other", "idle"))  # part, colour key


def choose_scale(cvc: pd.DataFrame, scale: str = "auto") -> tuple[str, str]:
    """``ms`` (one axis), ``panels`` (one per dtype) or ``shares`` for these configurations,
    and the sentence that says why.

    >>> import pandas as pd
    >>> cvc = pd.DataFrame({"dtype": ["float32", "bfloat16"], "step_ms": [7.0, 520.0]})
    >>> choose_scale(cvc)[0]
    'panels'
    """
    if scale not in ("auto", "ms", "panels", "shares"):
        raise SpecError(f"scale={scale!r} is not one of 'auto', 'ms', 'panels', 'shares'")
    if scale != "auto":
        return scale, f"scale={scale!r} as asked"
    step = cvc["step_ms"].where(cvc["step_ms"] > 0)
    ratio = step.max() / step.min() if step.notna().any() else 1.0
    if not ratio > SHARED_AXIS_MAX_RATIO:
        return "ms", f"step times are within {SHARED_AXIS_MAX_RATIO:g}x: one shared ms axis"
    within = step.groupby(cvc["dtype"]).agg(lambda s: s.max() / s.min()).max()
    slow, fast = cvc.loc[step.idxmax()], cvc.loc[step.idxmin()]
    why = (
        f"step times differ {ratio:.0f}x ({slow['dtype']} {slow['step_ms']:.1f} ms vs "
        f"{fast['dtype']} {fast['step_ms']:.1f} ms per step), so on one axis the short bars "
        "would vanish: "
    )
    if within > SHARED_AXIS_MAX_RATIO:
        return "shares", why + "each bar shows its parts as shares of its own step (ms on top)"
    return "panels", why + "one panel per dtype, each with its own ms axis"


def plot_compute_vs_comm(table: pd.DataFrame, scale: str = "auto") -> Plot:
    """Stacked bars of compute, comm and other per configuration; the table is ``compute_vs_comm``.

    When step times differ more than 10x (bfloat16 on a CPU without bf16 units next to
    float32), ``scale="auto"`` draws one panel per dtype, or shares of each step, and prints
    why; ``scale="ms"`` forces one shared axis.

    >>> from hpcprof_kit import timing                              # doctest: +SKIP
    >>> fig, numbers = timing.plot_compute_vs_comm(timing.load_timings("runs/"))  # doctest: +SKIP
    """
    from hpcprof_kit.traces.plots.figure import Plot, new_figure

    cvc = table if "comm_share" in table.columns else compute_vs_comm(table)
    cvc = cvc.sort_values(["app", "dtype", "nodes", "world_size"]).reset_index(drop=True)
    chosen, why = choose_scale(cvc, scale)
    if scale == "auto" and chosen != "ms":
        print(why)
    groups = list(cvc.groupby("dtype", sort=False)) if chosen == "panels" else [("", cvc)]
    fig = new_figure(max(4.0, 1.4 * len(cvc) + 1.5 * len(groups)), 3.6)
    axes = fig.subplots(1, len(groups), squeeze=False)[0]
    for ax, (_dtype, part) in zip(axes, groups, strict=True):
        _stacked(ax, part, shares=chosen == "shares")
    axes[0].set_ylabel(
        "share of the step" if chosen == "shares" else "ms per step (mean over ranks)"
    )
    axes[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    fig.suptitle(
        "compute vs communication per configuration"
        + ("" if chosen == "ms" else f"\n({why.split(': ')[-1]})"),
        fontsize=9,
    )
    out = cvc.copy()
    out.attrs["scale"], out.attrs["why"] = chosen, why
    return Plot(fig, out)


def _stacked(ax, cvc: pd.DataFrame, shares: bool) -> None:
    import numpy as np

    from hpcprof_kit.traces.plots.figure import COLORS

    labels = [
        f"{r.dtype}\n{r.world_size} rank{'s' * (r.world_size > 1)}, {r.nodes} node{'s' * (r.nodes > 1)}"
        for r in cvc.itertuples()
    ]
    x = np.arange(len(cvc))
    bottom = np.zeros(len(cvc))
    total = cvc[[f"{p}_ms" for p, _ in PARTS]].sum(axis=1).to_numpy()
    for part, color in PARTS:
        values = cvc[f"{part}_ms"].to_numpy()
        if shares:
            values = values / np.where(total > 0, total, 1)
        ax.bar(x, values, bottom=bottom, color=COLORS[color], label=part)
        bottom += values
    for xi, share, top, step in zip(x, cvc["comm_share"], bottom, cvc["step_ms"], strict=True):
        text = f"{step:.1f} ms, {100 * share:.0f}% comm" if shares else f"{100 * share:.0f}% comm"
        ax.text(xi, top, text, ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, labels, fontsize=8)
    ax.margins(y=0.12)
