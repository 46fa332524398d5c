"""Each rank's start-up on a trace without ``ProfilerStep`` steps, measured once, small enough
to keep in a rank's summary.

Such a trace is read as one pseudo step, its whole recording, and that holds the run's
start-up when the profiler ran from the first line: the device runtime's initialisation, the
first ``cudaMalloc``/``cudaFree`` (seconds), the modules' loading. A rank's start-up is its
trace up to its first device event; the steady state is the rest. Per rank this keeps the
spans, the host's longest runtime call in start-up, the device's idle in the steady state and
the device allocations and frees on each side, so that the rules read the same numbers from
the table and from per-rank summaries (``--mpi``).

>>> import pandas as pd
>>> df = pd.DataFrame({"rank": [0] * 4, "step": [-1] * 4, "device": [-1, -1, 0, 0],
...     "track": ["runtime", "runtime", "gpu", "gpu"], "name": ["cudaFree", "cudaMalloc",
...     "k", "k"], "ts_ns": [0, 3000, 5000, 9000], "dur_ns": [3000, 100, 2000, 1000]})
>>> s = startup_spans(df)
>>> s[["start_ns", "steady_ns", "end_ns", "longest_call", "steady_idle_ns"]].values.tolist()
[[0, 5000, 10000, 'cudaFree', 2000]]
>>> s[["startup_alloc_calls", "startup_alloc_ns", "steady_alloc_calls"]].values.tolist()
[[2, 3100, 0]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.analyses import intervals as iv
from hpcprof_kit.traces.analyses.breakdown import bare, text_test
from hpcprof_kit.traces.view import names as N

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

DEVICE_TRACKS = ("gpu", "comm", "memcpy", "memset")
COLUMNS = ["rank", "start_ns", "steady_ns", "end_ns", "longest_call", "longest_call_ns",
           "steady_idle_ns", "steady_alloc_calls", "steady_alloc_ns", "startup_alloc_calls",
           "startup_alloc_ns"]  # fmt: skip


def startup_spans(df: pd.DataFrame) -> pd.DataFrame:
    """Per rank without steps that has device events, the columns of ``COLUMNS``:
    ``start_ns`` (its first event), ``steady_ns`` (its first device event, where start-up
    ends), ``end_ns`` (its last event's end), the host's longest runtime call in start-up
    (``longest_call``, ``longest_call_ns``; "" and 0 when none), the steady state's time no
    device event runs (``steady_idle_ns``) and the device allocations and frees
    (``names.ALLOC``) that start in the steady state and in start-up (calls, ns). Ranks
    with steps are left out: their steps set start-up apart."""
    import pandas as pd

    df = bare(df)
    rank = df["rank"].to_numpy(dtype=np.int64)
    stepped = np.unique(rank[df["step"].to_numpy() >= 0])
    device = text_test(df["track"], lambda s: s.isin(DEVICE_TRACKS)) & (
        df["device"].to_numpy() >= 0
    )
    wanted = np.setdiff1d(np.unique(rank[device]), stepped)
    if not wanted.size:
        return pd.DataFrame(columns=COLUMNS).set_index("rank")
    ts = df["ts_ns"].to_numpy(dtype=np.int64)
    end = ts + df["dur_ns"].to_numpy(dtype=np.int64)
    host = df["device"].to_numpy() < 0
    runtime = text_test(df["track"], lambda s: s == "runtime") & ~device
    alloc = text_test(df["name"], lambda s: s.str.match(N.ALLOC)) & host
    names = df["name"].astype(str).to_numpy()
    rows = []
    for r in wanted.tolist():
        mine = rank == r
        steady = int(ts[mine & device].min())
        last = int(end[mine].max())
        early = np.flatnonzero(mine & runtime & (ts < steady))
        longest = early[np.argmax(end[early] - ts[early])] if early.size else None
        s, e = iv.union(ts[device & mine], end[device & mine])
        idle = (last - steady) - int(iv.measure(s, e, steady, last))
        later = mine & alloc & (ts >= steady)
        before = mine & alloc & (ts < steady)
        rows.append((int(r), int(ts[mine].min()), steady, last,
                     names[longest] if longest is not None else "",
                     int(end[longest] - ts[longest]) if longest is not None else 0, idle,
                     int(later.sum()), int((end - ts)[later].sum()), int(before.sum()),
                     int((end - ts)[before].sum())))  # fmt: skip
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.astype({c: np.int64 for c in COLUMNS if c != "longest_call"}).set_index("rank")
