"""Write the ranks of a trace table into one chrome-trace JSON that Perfetto opens at once.

Perfetto (ui.perfetto.dev) shows one file at a time; several ranks appear side by side only
when they live in one file with a distinct pid per rank. Here rank ``r`` gets the pid range
``r * 1000 + 0 .. 999`` (one pid per original process or device of that rank), named
``rank r: <original pid>``.

>>> from hpcprof_kit import traces                                            # doctest: +SKIP
>>> traces.merge_to_chrome("runs/train_local_N1_R2_20260101-120000/traces",
...                        "merged.json.gz")                                   # doctest: +SKIP
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from hpcprof_kit.errors import TraceFormatError

PIDS_PER_RANK = 1000
ALIGN_CHOICES = ("steps", "absolute")


def rank_offsets(df: Any, align: str = "steps") -> dict[int, int]:
    """Nanoseconds to add to each rank's times so the ranks line up (see merge_to_chrome).

    >>> import pandas as pd
    >>> df = pd.DataFrame({"rank": [0, 1], "name": ["ProfilerStep#3"] * 2, "ts_ns": [100, 250]})
    >>> rank_offsets(df)
    {0: 0, 1: -150}
    """
    if align not in ALIGN_CHOICES:
        raise TraceFormatError(
            f"align={align!r} is not one of {ALIGN_CHOICES}: 'steps' lines up each rank's "
            "first ProfilerStep, 'absolute' keeps the recorded clocks"
        )
    ranks = sorted(int(r) for r in np.unique(df["rank"]))
    if align == "absolute":
        return dict.fromkeys(ranks, 0)
    names = df["name"].astype(str)
    steps = df[names.str.startswith("ProfilerStep#")]
    first = steps.groupby("rank")["ts_ns"].min().to_dict()
    if not first:
        return dict.fromkeys(ranks, 0)
    target = min(first.values())
    return {r: int(target - first[r]) if r in first else 0 for r in ranks}


def merge_to_chrome(
    df_or_path: Any, out_path: str | os.PathLike[str], *, align: str = "steps"
) -> Path:
    """Write every rank of a trace table (or of the traces at a path) into one chrome JSON.

    Clocks: by default (``align="steps"``) each rank is shifted so that its first
    ``ProfilerStep`` starts when the earliest rank's first step starts. Ranks on different
    nodes read different clocks (skews of milliseconds are common), and a learner compares
    the same iteration across ranks, so lining up the step starts is the honest default; the
    shifts are stored in the output's ``hpcprofRankOffsetsNs``. ``align="absolute"`` keeps the
    recorded times, which is right on one node (one clock) when arrival skew at a collective
    is the question. Times are written in µs with three decimals relative to the earliest
    event, so no nanosecond is lost; ``.gz`` output is gzip-compressed.

    >>> import tempfile, pathlib
    >>> from hpcprof_kit.traces import load
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "merged.json"
    >>> merge_to_chrome(load("traces"), out)                                   # doctest: +SKIP
    PosixPath('.../merged.json')
    """
    if not hasattr(df_or_path, "columns"):
        from hpcprof_kit.traces.table.loader import load

        df_or_path = load(df_or_path)
    df = df_or_path
    if len(df) == 0:
        raise TraceFormatError(
            "the trace table is empty: nothing to merge (load a trace with events first)"
        )
    offsets = rank_offsets(df, align)
    ranks = df["rank"].to_numpy()
    ts = df["ts_ns"].to_numpy() + np.array([offsets[int(r)] for r in ranks], dtype=np.int64)
    origin = int(ts.min())
    ts -= origin

    pid_labels, new_pid = _number_within_rank(ranks, df["pid"], base=PIDS_PER_RANK)
    tid_labels, new_tid = _number_within_rank(ranks, df["tid"], base=1)
    names = _json_strings(df["name"])
    cats = _json_strings(df["cat"])
    instant = (df["track"] == "instant").to_numpy()
    dur = df["dur_ns"].to_numpy()
    step = df["step"].to_numpy()
    lines = []
    for (rank, pid), label in pid_labels.items():
        name = json.dumps(f"rank {rank}: {label}")
        lines.append(
            f'{{"ph":"M","name":"process_name","pid":{pid},"tid":0,"args":{{"name":{name}}}}}'
        )
        lines.append(
            f'{{"ph":"M","name":"process_sort_index","pid":{pid},"tid":0,"args":{{"sort_index":{pid}}}}}'
        )
    threads = np.unique(np.stack([new_pid, new_tid, ranks.astype(np.int64)]), axis=1)
    for pid, tid, rank in threads.T:
        name = json.dumps(str(tid_labels[(int(rank), int(tid))]))
        lines.append(
            f'{{"ph":"M","name":"thread_name","pid":{pid},"tid":{tid},"args":{{"name":{name}}}}}'
        )
    name_codes = df["name"].cat.codes.to_numpy()
    cat_codes = df["cat"].cat.codes.to_numpy()
    for i in range(len(df)):
        t = int(ts[i])
        head = f'{{"ph":"{"i" if instant[i] else "X"}","pid":{new_pid[i]},"tid":{new_tid[i]},'
        when = f'"ts":{t // 1000}.{t % 1000:03d}'
        if not instant[i]:
            d = int(dur[i])
            when += f',"dur":{d // 1000}.{d % 1000:03d}'
        else:
            when += ',"s":"t"'
        lines.append(
            f'{head}"cat":{cats[cat_codes[i]]},"name":{names[name_codes[i]]},{when},'
            f'"args":{{"rank":{ranks[i]},"step":{step[i]}}}}}'
        )
    doc_head = json.dumps(
        {
            "displayTimeUnit": "ms",
            "hpcprofAlign": align,
            "hpcprofRankOffsetsNs": {str(r): o for r, o in offsets.items()},
            "hpcprofOriginNs": origin,
        }
    )[:-1]
    out = Path(out_path)
    opener = gzip.open if out.name.endswith(".gz") else open
    with opener(out, "wt", encoding="utf-8") as fh:
        fh.write(doc_head + ',"traceEvents":[\n')
        fh.write(",\n".join(lines))
        fh.write("\n]}\n")
    return out


def _json_strings(col: Any) -> list[str]:
    return [json.dumps(str(c)) for c in col.cat.categories]


def _number_within_rank(ranks: np.ndarray, labels: Any, base: int) -> tuple[dict, np.ndarray]:
    """Number each (rank, label) pair within its rank; pids get ``rank * base + index``."""
    codes = labels.cat.codes.to_numpy().astype(np.int64)
    cats = list(labels.cat.categories)
    pairs, inverse = np.unique(
        np.stack([ranks.astype(np.int64), codes]), axis=1, return_inverse=True
    )
    numbers, table, seen = [], {}, {}
    for rank, code in pairs.T:
        index = seen.get(int(rank), 0)
        seen[int(rank)] = index + 1
        number = int(rank) * base + index if base > 1 else index + 1
        numbers.append(number)
        table[(int(rank), number)] = cats[int(code)] if code >= 0 else ""
    return table, np.asarray(numbers, dtype=np.int64)[inverse.ravel()]
