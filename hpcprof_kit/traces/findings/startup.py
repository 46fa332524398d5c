"""Start-up set apart from the steady state on a trace without ``ProfilerStep`` steps.

Such a trace is read as one pseudo step, its whole recording, and that holds the run's
start-up when the profiler ran from the first line: the device runtime's initialisation,
the first ``cudaMalloc``/``cudaFree`` (seconds), the modules' loading. A rule that read it as
a step would call seconds of start-up "99.8 % of the step" and promise that gain every
step. Here a rank's start-up is its trace up to its first device event; the rules that
read time on such a trace measure the rest, and no gain is given per step: there is none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.analyses.breakdown import bare, text_test
from hpcprof_kit.traces.view.run_view import RunView

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

DEVICE_TRACKS = ("gpu", "comm", "memcpy", "memset")
WARMUP_ADVICE = (
    "Profile the steady state, not the start-up: wrap the loop's steps in "
    "torch.profiler.schedule(wait=1, warmup=1, active=3) and call prof.step() each step, so "
    "the trace has ProfilerStep steps and the start-up stays out of them."
)


def _events(view: RunView):
    """The table without metadata, and its rows' rank, start, end (ns) and whether each is a
    device event."""
    df = bare(view.df)
    rank = df["rank"].to_numpy(dtype=np.int64)
    ts = df["ts_ns"].to_numpy(dtype=np.int64)
    end = ts + df["dur_ns"].to_numpy(dtype=np.int64)
    device = text_test(df["track"], lambda s: s.isin(DEVICE_TRACKS))
    device &= df["device"].to_numpy() >= 0
    return df, rank, ts, end, device


def startup(view: RunView) -> pd.DataFrame | None:
    """Per rank of a trace without steps: ``start_ns`` (its first event), ``steady_ns`` (its
    first device event, where start-up ends), ``end_ns`` (its last event's end) and the
    host's longest runtime call in start-up (``longest_call``, ``longest_call_ns``); None
    when the trace has steps, no events at hand or no device events."""
    if view.stepped or view.df is None:
        return None
    import pandas as pd

    df, rank, ts, end, device = _events(view)
    runtime = text_test(df["track"], lambda s: s == "runtime") & ~device
    names = df["name"].astype(str).to_numpy()
    rows = []
    for r in np.unique(rank[device]):
        mine = rank == r
        steady = int(ts[mine & device].min())
        early = np.flatnonzero(mine & runtime & (ts < steady))
        longest = early[np.argmax(end[early] - ts[early])] if early.size else None
        rows.append((int(r), int(ts[mine].min()), steady, int(end[mine].max()),
                     names[longest] if longest is not None else "",
                     int(end[longest] - ts[longest]) if longest is not None else 0))  # fmt: skip
    if not rows:
        return None
    return pd.DataFrame(rows, columns=["rank", "start_ns", "steady_ns", "end_ns", "longest_call",
                                       "longest_call_ns"]).set_index("rank")  # fmt: skip


def steady_device_idle(view: RunView, spans: pd.DataFrame) -> pd.Series:
    """Per rank, the device's idle share (%) of its steady state (``spans``' ``steady_ns`` to
    ``end_ns``): the time no device event of the rank runs."""
    import pandas as pd

    from hpcprof_kit.traces.analyses import intervals as iv

    df, rank, ts, end, device = _events(view)
    out = {}
    for r, span in spans.iterrows():
        s, e = iv.union(ts[device & (rank == r)], end[device & (rank == r)])
        wall = int(span["end_ns"]) - int(span["steady_ns"])
        busy = iv.measure(s, e, int(span["steady_ns"]), int(span["end_ns"]))
        out[int(r)] = 100.0 * (wall - busy) / wall if wall > 0 else 0.0
    return pd.Series(out, dtype=float)


def in_steady_state(view: RunView, spans: pd.DataFrame, mask: np.ndarray) -> np.ndarray:
    """``mask`` (rows of the view's events) less the rows that start in their rank's
    start-up."""
    df = view.df
    rank = df["rank"].to_numpy(dtype=np.int64)
    steady = spans["steady_ns"].reindex(np.unique(rank)).fillna(np.iinfo(np.int64).min)
    begin = steady.reindex(rank).to_numpy(dtype=np.int64)
    return mask & (df["ts_ns"].to_numpy(dtype=np.int64) >= begin)
