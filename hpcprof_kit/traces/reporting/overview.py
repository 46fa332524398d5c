"""The report's overview pane: step time per rank, the rank x step view, the breakdown,
device utilisation with communication split into transfer and waiting, the idle split per
stream, and the events by category."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces.analyses import breakdown as bd
from hpcprof_kit.traces.analyses.breakdown import PARTS, bare
from hpcprof_kit.traces.read.kineto import CATEGORY_TRACKS
from hpcprof_kit.traces.reporting.pane import PANE_TITLES, SUMMARY_ONLY, Pane
from hpcprof_kit.traces.view.run_view import RunView

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

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


def _quantiles(values: np.ndarray) -> dict[str, float]:
    if values.size == 0:
        return {"p10": math.nan, "median": math.nan, "p90": math.nan}
    p10, med, p90 = np.quantile(values, [0.1, 0.5, 0.9])
    return {"p10": float(p10), "median": float(med), "p90": float(p90)}


def overview(view: RunView) -> Pane:
    """Step time per rank and per step, the breakdown, utilisation, idle split, categories
    (``view.df`` None: a report of per-rank summaries, which lack the events)."""
    import pandas as pd

    df, b, steps = view.df, view.b, view.steps
    pane = Pane(PANE_TITLES["overview"])
    if b.empty:
        pane.missing["steps"] = "the trace has no events with a duration"
        return pane
    busy, wait = bd.busy_and_wait(b)
    per_step = steps
    from hpcprof_kit.traces.findings.ranks import straggler_steps

    # the steps in which a rank is the straggler by the rule's test, not merely the slowest
    clear = straggler_steps(view) if int(b["rank"].nunique()) > 1 else {}
    # every rank at once: NumPy's quantiles of each rank's sorted values
    table = pd.DataFrame({"rank": b["rank"].to_numpy(), "wall": b["wall_ns"].to_numpy() / 1e6,
                          "busy": busy, "wait": wait, "kind": b["kind"].to_numpy()})  # fmt: skip
    g = table.groupby("rank", sort=True)
    rows = pd.DataFrame({"rank": g.size().index.to_numpy(dtype=np.int64)})
    rows["kind"] = g["kind"].first().to_numpy()
    rows["steps"] = g.size().to_numpy(dtype=np.int64)
    rows["wall_median_ms"] = g["wall"].median().to_numpy()
    rows["wall_p10_ms"] = g["wall"].quantile(0.1).to_numpy()
    rows["wall_p90_ms"] = g["wall"].quantile(0.9).to_numpy()
    rows["worked_median_ms"] = g["busy"].median().to_numpy(dtype=float) / 1e6
    rows["worked_max_ms"] = g["busy"].max().to_numpy(dtype=float) / 1e6
    rows["waited_median_ms"] = g["wait"].median().to_numpy(dtype=float) / 1e6
    # a median hides a rank that is slow in a few steps only: say in which
    rows["straggler_in_steps"] = [",".join(str(st) for st in clear.get(int(r), []))
                                  for r in rows["rank"].tolist()]  # fmt: skip
    pane.tables["steps"] = rows
    if int(b["rank"].nunique()) > 1:
        pane.tables["rank_by_step"] = per_step_view(per_step)
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
        transfer, waiting = comm_transfer_and_wait(device)
        device = device.assign(transfer_ns=transfer, waiting_ns=waiting)
        g = device.groupby("rank")
        wall = g["wall_ns"].sum().astype(float)
        pane.tables["utilisation"] = pd.DataFrame(
            {
                "rank": wall.index.to_numpy(dtype=np.int64),
                "compute_pct": 100 * (g["compute_ns"].sum() + g["hidden_comm_ns"].sum()) / wall,
                "comm_pct": 100 * (g["hidden_comm_ns"].sum() + g["transfer_ns"].sum()) / wall,
                "comm_waiting_pct": 100 * g["waiting_ns"].sum() / wall,
                "memory_pct": 100 * g["memory_ns"].sum() / wall,
                "device_idle_pct": 100 * (g["host_ns"].sum() + g["idle_ns"].sum()) / wall,
            }
        ).reset_index(drop=True)
        pane.notes.append(
            "comm_pct is communication moving data (hidden behind compute, or exposed as long "
            "as the last rank to arrive waits); comm_waiting_pct is the rest of the exposed "
            "communication: the rank waiting for slower ranks"
            + ("" if device["rank"].nunique() > 1 else " (one rank: all counted as transfer)")
        )
        if df is None:
            pane.missing["idle_split"] = SUMMARY_ONLY
        else:
            try:
                pane.tables["idle_split"] = idle_by_stream(df, view.idle)
                pane.notes.append(
                    "idle_split: each stream's idle time on its own; streams run side by "
                    "side, so their idle times do not add up to the device's"
                )
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


def comm_transfer_and_wait(b: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a step breakdown: its exposed communication split into the transfer (what
    even the last rank to arrive waits for: the step's smallest exposed comm across ranks)
    and the waiting for slower ranks (the rest), ns. With one rank in a step, all transfer.

    >>> import pandas as pd
    >>> b = pd.DataFrame({"rank": [0, 1, 0], "step": [1, 1, 2],
    ...                   "exposed_comm_ns": [9_000_000, 1_000_000, 2_000_000]})
    >>> [a.tolist() for a in comm_transfer_and_wait(b)]
    [[1000000, 1000000, 2000000], [8000000, 0, 0]]
    """
    exposed = b["exposed_comm_ns"].to_numpy(dtype=np.int64)
    floor = b.groupby("step")["exposed_comm_ns"].transform("min").to_numpy(dtype=np.int64)
    return floor, exposed - floor


STREAM_ROLES = ("compute", "communication", "copies")
_ROLE_OF_TRACK = {"gpu": 0, "comm": 1, "memcpy": 2, "memset": 2}


def idle_by_stream(df: pd.DataFrame, split: pd.DataFrame) -> pd.DataFrame:
    """The overview's idle split (``split``: :func:`~hpcprof_kit.traces.analyses.device_idle.
    idle_split` of ``df``): one row per rank and device stream, with what the stream runs
    (``compute``, ``communication``, ``copies``: the most of its events), in ms; no summed
    row, since a communication stream idles while the compute stream works."""
    import pandas as pd

    from hpcprof_kit.traces.analyses.device_idle import WAITS

    split = split[split["stream"] != -1]
    on = (df["stream"].to_numpy() >= 0) & (df["device"].to_numpy() >= 0)
    track = df["track"][on].astype("category")  # a no-op on a loaded table
    # each track label once, then its role per row by code
    labels = [str(t) for t in track.cat.categories]
    role_of = np.array([_ROLE_OF_TRACK.get(t, -1) for t in labels] or [-1])
    role = role_of[track.cat.codes.to_numpy()]
    rows = pd.DataFrame(
        {
            "rank": df["rank"].to_numpy()[on].astype(np.int64),
            "stream": df["stream"].to_numpy()[on].astype(np.int64),
            "role": role,
        }
    )
    counts = rows[rows["role"] >= 0].groupby(["rank", "stream", "role"]).size()
    counts = counts.reset_index(name="n").sort_values(["n", "role"], ascending=[False, True])
    best = counts.drop_duplicates(["rank", "stream"]).set_index(["rank", "stream"])["role"]
    runs = best.map(dict(enumerate(STREAM_ROLES)))
    keys = pd.MultiIndex.from_frame(split[["rank", "stream"]].astype(np.int64))
    out = pd.DataFrame(
        {
            "rank": split["rank"].to_numpy(),
            "device": split["device"].to_numpy(),
            "stream": split["stream"].to_numpy(),
            "runs": runs.reindex(keys).fillna("").to_numpy(),
            "events": split["events"].to_numpy(),
            "idle_ms": split["idle_ns"].to_numpy() / 1e6,
        }
    )
    for w in WAITS:
        out[f"{w}_ms"] = split[f"{w}_ns"].to_numpy() / 1e6
    return out


def per_step_view(steps: pd.DataFrame) -> pd.DataFrame:
    """The rank x step view for the overview: per step, each rank's time worked before
    waiting (ms, one column per rank), the straggler and what it cost the others."""
    out = steps.drop(columns=["tied", "spread_pct"], errors="ignore").copy()
    out.columns = [f"rank {c}" if not isinstance(c, str) else c for c in out.columns]
    return out.reset_index()


def categories(df: pd.DataFrame) -> pd.DataFrame:
    """Events per category and track, with whether the kit reads that category on purpose."""
    import pandas as pd

    df = bare(df) if df.attrs else df  # the view's table is bare already
    cat, track = df["cat"], df["track"]
    if isinstance(cat.dtype, pd.CategoricalDtype) and isinstance(track.dtype, pd.CategoricalDtype):
        # the pairs of codes counted in C (a group-by of a million rows costs more)
        c, t = (x.cat.codes.to_numpy().astype(np.int64) for x in (cat, track))
        ok, width = (c >= 0) & (t >= 0), len(track.cat.categories)
        n = np.bincount(c[ok] * width + t[ok], minlength=len(cat.cat.categories) * width)
        pairs = np.flatnonzero(n)
        counts = pd.DataFrame({
            "cat": np.asarray(cat.cat.categories.astype(str), dtype=object)[pairs // width],
            "track": np.asarray(track.cat.categories.astype(str), dtype=object)[pairs % width],
            "events": n[pairs].astype(np.int64),
        })  # fmt: skip
    else:
        counts = df.groupby(["cat", "track"], observed=True).size().rename("events")
        counts = counts.reset_index()
    counts = counts.astype({"cat": str, "track": str})
    counts.columns = ["cat", "track", "events"]
    counts["known"] = counts["cat"].isin(KNOWN_CATS)
    counts = counts.sort_values(["events", "cat"], ascending=[False, True]).reset_index(drop=True)
    return pd.DataFrame(counts)
