"""The few event arguments the rules read, from the trace files a table came from: copy bytes,
collective name, message elements, dtype and group size (on the copy and collective kernels,
keyed by rank and correlation id) and the input types of the ops that launch kernels (keyed
by rank and External id). The table keeps no arguments; each file is read once per version.

>>> import json, tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t-0-of-1.json"
>>> _ = p.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "gpu_memcpy",
...     "name": "Memcpy HtoD (Pageable -> Device)", "ts": 1, "dur": 2,
...     "args": {"bytes": 64, "correlation": 5}}]}))
>>> file_args(str(p))["bytes"].tolist()
[64]
"""

from __future__ import annotations

import gzip
import os
from functools import lru_cache
from typing import Any

import msgspec
import numpy as np

from ..memory_events import rank_files
from ..stream import _clean

# bytes per element of the dtypes record_param_comms and the NCCL kernels name
DTYPE_BYTES = {"Float": 4, "float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Int": 4,
               "Long": 8, "Byte": 1, "Char": 1, "Bool": 1, "Float8_e4m3fn": 1}  # fmt: skip
COLUMNS = ("corr", "ext", "bytes", "coll", "group", "input_type")


class _Args(msgspec.Struct):
    correlation: Any = None
    external_id: Any = msgspec.field(default=None, name="External id")
    bytes: Any = None
    coll: Any = msgspec.field(default=None, name="Collective name")
    nelems: Any = msgspec.field(default=None, name="In msg nelems")
    dtype: Any = None
    group: Any = msgspec.field(default=None, name="Group size")
    input_type: Any = msgspec.field(default=None, name="Input type")


class _Event(msgspec.Struct):
    args: _Args | None = None


class _Doc(msgspec.Struct):
    traceEvents: list[_Event] = []  # noqa: N815 (the format's name)


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


@lru_cache(maxsize=64)
def _read(path: str, size: int, mtime_ns: int) -> dict[str, np.ndarray]:
    with open(path, "rb") as fh:
        raw = fh.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        doc = msgspec.json.decode(raw, type=_Doc)
    except msgspec.DecodeError:
        doc = msgspec.json.decode(_clean(raw), type=_Doc)
    rows: dict[str, list] = {c: [] for c in COLUMNS}
    for e in doc.traceEvents:
        a = e.args
        if a is None or (a.bytes is None and a.coll is None and a.input_type is None):
            continue
        nbytes = _int(a.bytes)
        if nbytes < 0 and a.nelems is not None:
            nbytes = _int(a.nelems) * DTYPE_BYTES.get(str(a.dtype), 4)
        rows["corr"].append(_int(a.correlation))
        rows["ext"].append(_int(a.external_id))
        rows["bytes"].append(nbytes)
        rows["coll"].append(str(a.coll or ""))
        rows["group"].append(_int(a.group))
        types = a.input_type if isinstance(a.input_type, list) else []
        rows["input_type"].append(",".join(str(t) for t in types))
    return {
        "corr": np.asarray(rows["corr"], dtype=np.int64),
        "ext": np.asarray(rows["ext"], dtype=np.int64),
        "bytes": np.asarray(rows["bytes"], dtype=np.int64),
        "coll": np.asarray(rows["coll"], dtype=object),
        "group": np.asarray(rows["group"], dtype=np.int64),
        "input_type": np.asarray(rows["input_type"], dtype=object),
    }


def file_args(path: str) -> dict[str, np.ndarray]:
    """The kept arguments of one trace file as columns (``COLUMNS``), in file order."""
    st = os.stat(path)
    return _read(os.path.abspath(path), st.st_size, st.st_mtime_ns)


def run_args(meta: dict) -> Any:
    """The kept arguments of every rank in ``meta`` (``df.attrs["ranks"]``), with a ``rank``
    column; None when no file can be read (the table was built in memory, or moved)."""
    import pandas as pd

    frames = []
    for rank, m in (meta or {}).items():
        for _, source in rank_files(m):
            try:
                cols = file_args(source)
            except (OSError, msgspec.DecodeError):
                continue
            frame = pd.DataFrame(cols)
            frame.insert(0, "rank", int(rank))
            frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else None
