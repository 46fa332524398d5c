"""The trace table: the one columnar shape every loader produces and every analysis reads.

One row per complete event (Chrome phase ``X``) and per instant event (``i``/``I``, dur 0).
Times are absolute integer nanoseconds. Per-rank metadata lives in ``df.attrs["ranks"]``:
``{rank: {"world_size", "backend", "device_properties", "source", "format", ...}}``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpcprof_kit.traces.read.events import TRACKS  # the track names the readers give

# column -> dtype, in table order
COLUMNS: dict[str, str] = {
    "rank": "int32",
    "pid": "category",  # OS pid, device index or a label ("Spans"); kept as text
    "tid": "category",
    "track": "category",  # one of TRACKS
    "cat": "category",
    "name": "category",
    "ts_ns": "int64",  # absolute start, ns
    "dur_ns": "int64",  # duration, ns (0 for instants)
    "step": "int32",  # ProfilerStep number containing the event's start, or -1
    "cycle": "int16",  # which schedule cycle's file the event came from (<prefix>_cycle<k>-...)
    "corr": "int64",  # correlation id (launch <-> kernel), -1 if none
    "ext_id": "int64",  # External id, -1 if none
    "device": "int32",  # device index for device events, -1 for host events
    "stream": "int64",  # CUDA stream / SYCL queue / unitrace engine id, -1 for host
}

RANK_META_KEYS = ("world_size", "backend", "device_properties", "source", "format", "warnings")
# A rank loaded from several cycle files also has "cycles" and "sources" (one per file).


def empty_table() -> pd.DataFrame:
    """A zero-row trace table with the right columns and dtypes."""
    data = {}
    for col, dtype in COLUMNS.items():
        if dtype == "category":
            data[col] = pd.Categorical([])
        else:
            data[col] = np.array([], dtype=dtype)
    df = pd.DataFrame(data)
    df.attrs["ranks"] = {}
    return df


def check_table(df: pd.DataFrame) -> None:
    """Raise AssertionError naming the first column that breaks the contract (used by tests)."""
    missing = [c for c in COLUMNS if c not in df.columns]
    assert not missing, f"trace table lacks columns {missing}"
    for col, dtype in COLUMNS.items():
        actual = str(df[col].dtype)
        assert actual == dtype, f"column {col!r} has dtype {actual}, contract says {dtype}"
    bad = set(df["track"].cat.categories) - set(TRACKS)
    assert not bad, f"tracks outside the vocabulary: {sorted(bad)}"
    assert "ranks" in df.attrs, "df.attrs['ranks'] (per-rank metadata) is missing"
