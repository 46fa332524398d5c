"""The few event arguments the rules read, from the trace files a table came from: copy bytes,
collective name, message bytes and group size (on the copy and collective kernels, keyed by
rank and correlation id) and the input types of the ops that launch kernels (keyed by rank and
External id). The events are found and decoded by :mod:`hpcprof_kit.traces.event_args_files`
(only those carrying such an argument; each file once per version), the reader
``traces.event_args`` uses; this module only keys them by the ids the rules join on.

>>> import json, tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t-0-of-1.json"
>>> _ = p.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "gpu_memcpy",
...     "name": "Memcpy HtoD (Pageable -> Device)", "ts": 1, "dur": 2,
...     "args": {"bytes": 64, "correlation": 5}}]}))
>>> cols = file_args(str(p))
>>> cols["bytes"].tolist(), cols["corr"].tolist()
([64], [5])
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from ...errors import TraceFormatError
from ..event_args_files import file_event_args
from ..event_args_table import DTYPE_BYTES
from ..memory_events import rank_files

COLUMNS = ("corr", "ext", "bytes", "coll", "group", "input_type")
KINDS = ("copies", "collectives", "inputs")  # the arguments the rules read


def _ids(values: list) -> np.ndarray:
    return np.array([-1 if v is None else v for v in values], dtype=np.int64)


def _types(text: str | None) -> str:
    """``'["float", "float"]'`` -> ``"float,float"`` ("" when not a list)."""
    try:
        types = msgspec.json.decode(text) if text else None
    except msgspec.DecodeError:
        return ""
    return ",".join(str(t) for t in types) if isinstance(types, list) else ""


def file_args(path: str) -> dict[str, np.ndarray]:
    """The kept arguments of one trace file as columns (``COLUMNS``), in file order: the
    events with a byte count, a collective's name or input types."""
    got = file_event_args(path, KINDS)
    keep = [i for i, (b, c, t) in enumerate(zip(got["bytes"], got["collective"],
            got["input_types"], strict=True)) if b is not None or c is not None or t]  # fmt: skip
    nbytes = []
    for i in keep:
        b, elems = got["bytes"][i], got["msg_elems"][i]
        if b is None and elems is not None:  # a collective: its elements times their size
            b = elems * DTYPE_BYTES.get(str(got["dtype"][i]), 4)
        nbytes.append(b)
    return {
        "corr": _ids([got["correlation"][i] for i in keep]),
        "ext": _ids([got["external_id"][i] for i in keep]),
        "bytes": _ids(nbytes),
        "coll": np.array([got["collective"][i] or "" for i in keep], dtype=object),
        "group": _ids([got["group_size"][i] for i in keep]),
        "input_type": np.array([_types(got["input_types"][i]) for i in keep], dtype=object),
    }


def run_args(meta: dict) -> Any:
    """The kept arguments of every rank in ``meta`` (``df.attrs["ranks"]``), with a ``rank``
    column; None when no file can be read (the table was built in memory, or moved)."""
    import pandas as pd

    frames, read = [], False
    for rank, m in (meta or {}).items():
        for _, source in rank_files(m):
            try:
                cols = file_args(source)
            except (OSError, TraceFormatError, msgspec.DecodeError):
                continue
            read = True
            if not len(cols["corr"]):
                continue
            frame = pd.DataFrame(cols)
            frame.insert(0, "rank", int(rank))
            frames.append(frame)
    if not frames:  # no file read: None; files without any of the arguments: no rows
        return pd.DataFrame(columns=["rank", *COLUMNS]) if read else None
    return pd.concat(frames, ignore_index=True)
