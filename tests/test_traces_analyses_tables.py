"""(No tests here.) Build small trace tables by hand (the contract of hpcprof_kit/traces/table/schema.py) for tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpcprof_kit.traces.table.schema import COLUMNS

DEFAULTS = {
    "rank": 0,
    "pid": "100",
    "tid": "1",
    "track": "cpu",
    "cat": "cpu_op",
    "step": -1,
    "cycle": 0,
    "corr": -1,
    "ext_id": -1,
    "device": -1,
    "stream": -1,
}
DEVICE_TRACKS = {"gpu", "comm_dev", "memcpy", "memset"}
CATS = {"gpu": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset", "runtime": "cuda_runtime"}


def table(events: list[tuple], **meta) -> pd.DataFrame:
    """Events as (rank, track, name, ts_ns, dur_ns[, tid]); track 'comm_dev' = device comm kernel."""
    rows = []
    for ev in events:
        rank, track, name, ts, dur = ev[:5]
        row = dict(DEFAULTS, rank=rank, name=name, ts_ns=ts, dur_ns=dur)
        if len(ev) > 5:
            row["tid"] = str(ev[5])
        if track in DEVICE_TRACKS:
            stream = 13 if track == "comm_dev" else 7  # NCCL runs on its own stream
            row.update(pid="0", tid=str(stream), device=0, stream=stream)
        row["track"] = "comm" if track == "comm_dev" else track
        row["cat"] = "kernel" if track == "comm_dev" else CATS.get(track, "cpu_op")
        if name.startswith("ProfilerStep#"):
            row["cat"] = "user_annotation"
        rows.append(row)
    df = pd.DataFrame(rows)
    for col, dtype in COLUMNS.items():
        df[col] = (
            df[col].astype("category") if dtype == "category" else df[col].astype(np.dtype(dtype))
        )
    df = df[list(COLUMNS)]
    df.attrs["ranks"] = {r: dict(meta) for r in sorted(df["rank"].unique().tolist())}
    return df
