"""Whether a rank's trace lost events, read from the ids the profiler gives its ops.

torch.profiler numbers every op it records (``args["External id"]``) in turn. Where it
numbers them one by one (the median step from one id a rank's ops hold to the next is 1),
a copy of the trace cut into blocks (a sample, a file trimmed to fit) keeps runs of whole
ids with a few holes between them many times that step: when those holes hold most of the
ids' range, the events of that time were dropped, and a device that shows nothing then was
not seen, not idle. Where the ids are sparse everywhere (some recordings number other work
in between), they cannot tell, and nothing is said.

>>> import pandas as pd
>>> df = pd.DataFrame({"rank": [0] * 6, "cat": ["cpu_op"] * 6, "device": [-1] * 6,
...                    "ext_id": [1, 2, 3, 900, 901, 902]})
>>> holes = op_id_holes(df)[0]
>>> holes["ops"], holes["span"], holes["in_holes"], lost_events(holes)
(6, 902, 896, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.analyses.breakdown import bare, text_test

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

HOLE_STEPS = 16  # a hole: a step between ids this many times the median step
HOLE_LEAST = 64  # ... and at least this many ids
LOST_SHARE = 0.5  # holes holding this share of the ids' range: events were dropped


def op_id_holes(df: pd.DataFrame) -> dict[int, dict[str, int]]:
    """Per rank: its host ops with an id (``ops``), the range of their ids (``span``), the
    median step from one id to the next (``step``) and the ids that fall in holes
    (``in_holes``)."""
    df = bare(df)
    if "ext_id" not in df or df.empty:
        return {}
    ext = df["ext_id"].to_numpy(dtype=np.int64)
    ops = text_test(df["cat"], lambda s: s == "cpu_op") & (ext >= 0)
    ops &= df["device"].to_numpy() < 0
    rank = df["rank"].to_numpy(dtype=np.int64)[ops]
    ids = ext[ops]
    out: dict[int, dict[str, int]] = {}
    if not ids.size:
        return out
    order = np.lexsort((ids, rank))
    rank, ids = rank[order], ids[order]
    cuts = np.flatnonzero(rank[1:] != rank[:-1]) + 1
    for r, mine in zip(rank[np.r_[0, cuts]].tolist(), np.split(ids, cuts), strict=True):
        mine = np.unique(mine)
        gaps = np.diff(mine)
        step = int(np.median(gaps)) if gaps.size else 1
        hole = gaps[gaps > max(HOLE_LEAST, HOLE_STEPS * step)]
        out[int(r)] = {"ops": int(mine.size), "span": int(mine[-1] - mine[0] + 1),
                       "step": step, "in_holes": int((hole - 1).sum())}  # fmt: skip
    return out


def lost_events(holes: dict[str, int] | None) -> bool:
    """Whether a rank's ids (:func:`op_id_holes`) say its trace dropped most of its events."""
    if not holes or holes.get("step") != 1 or holes.get("span", 0) <= 0:
        return False
    return holes["in_holes"] >= LOST_SHARE * holes["span"]
