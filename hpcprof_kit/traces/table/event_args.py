"""The event arguments the rules need (copy sizes, collective sizes, input shapes, launch
shapes), read back from the trace files a trace table came from.

The trace table keeps no event arguments but the few the rules read (:mod:`.kept_args`):
keeping them all would cost every ``load`` time and memory. This module reads, from each file
named in ``df.attrs["ranks"]``, only the events that carry one of the arguments asked for
(streamed piece by piece, never the whole JSON; each file once per version), and matches them to the
table's rows by rank, schedule cycle, thread, name and time, as ``memory_events`` does for
the ``[memory]`` events. What a real Kineto trace writes::

    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", ...,
     "args": {"bytes": 67108864, "memory bandwidth (GB/s)": 5.9, ...}}
    {"ph": "X", "cat": "kernel", ..., "args": {"grid": [2400, 1, 1], "block": [256, 1, 1]}}
    {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", ..., "args": {
     "Collective name": "allreduce", "In msg nelems": 2049000, "dtype": "Float",
     "Group size": 8}}
    {"ph": "X", "cat": "cpu_op", ..., "args": {"Input Dims": [[8, 20]], "Input type": ["float"]}}

ROCm writes a copy's size on its runtime call (``hipMemcpyWithStream``, ``"size": "2560"``),
XPU names its copies ``Memcpy M2D (MEMORY(Unknown) -> DEVICE)``; both are read.

>>> import json, tempfile, pathlib
>>> from hpcprof_kit import traces
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t-0-of-1.json"
>>> _ = p.write_text(json.dumps({"traceEvents": [
...     {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
...      "tid": 7, "ts": 10.5, "dur": 3.0, "args": {"bytes": 4096, "stream": 7}}]}))
>>> args = event_args(traces.load(p, cache=False))
>>> args[["bytes", "copy_kind", "mem_kind"]].to_dict("records")
[{'bytes': 4096, 'copy_kind': 'HtoD', 'mem_kind': 'Pageable'}]
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import numpy as np

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces.read.event_args_files import DTYPE_BYTES, KINDS, file_event_args
from hpcprof_kit.traces.read.memory_events import rank_files

COLUMNS = (
    "bytes",
    "copy_kind",
    "mem_kind",
    "collective",
    "msg_elems",
    "dtype",
    "group_size",
    "input_dims",
    "input_types",
    "grid",
    "block",
)
_INTS = ("bytes", "msg_elems", "group_size")
# "Input type" words (C++ type names) -> the same names
_INPUT_DTYPES = {
    "float": "Float", "double": "Double", "c10::Half": "Half", "c10::BFloat16": "BFloat16",
    "int": "Int", "long int": "Long", "short int": "Short", "signed char": "Char",
    "unsigned char": "Byte", "bool": "Bool",
}  # fmt: skip
# Memcpy <kind> (<src> -> <dst>): CUDA, ROCm and XPU spellings
_COPY = re.compile(r"^Memcpy (\w+)(?: \((.+?) -> (.+)\))?$")
_MEMSET = re.compile(r"^Memset \((.+)\)$")
_XPU_KINDS = {"M2D": "HtoD", "D2M": "DtoH", "D2D": "DtoD", "M2M": "HtoH"}
_CUDA_KINDS = ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP")
# memory kinds as the names spell them; "Host" (ROCm) and "MEMORY(Unknown)" (XPU) say nothing
_MEM_KINDS = {
    "Pageable": "Pageable", "Pinned": "Pinned", "Device": "Device", "DEVICE": "Device",
    "Managed": "Managed", "MEMORY(Device)": "Device",
}  # fmt: skip
_COMM_ANNOTATION = re.compile(r"^(?:nccl|rccl|gloo|xccl|ccl|mpi):(\w+)$")
# the columns each kind fills
_KIND_COLUMNS = {
    "copies": ("bytes", "copy_kind", "mem_kind"),
    "collectives": ("bytes", "collective", "msg_elems", "dtype", "group_size"),
    "inputs": ("input_dims", "input_types"),
    "launches": ("grid", "block"),
}
_KEYS = ["rank", "cycle", "pid", "tid", "name", "ts_ns"]


def event_args(df: Any, kinds: tuple[str, ...] | list[str] | None = None) -> Any:
    """The arguments of the table's rows that carry them, indexed by the rows' labels in
    ``df`` (rows in table order; rows without any left out).

    Columns: ``bytes`` (copy or memset bytes, or a collective's input bytes), ``copy_kind``
    (``HtoD``, ``DtoH``, ``DtoD``, ``HtoH``, ``PtoP``), ``mem_kind`` (the host side's memory:
    ``Pageable``, ``Pinned``, ``Device``), ``collective``, ``msg_elems`` (input elements),
    ``dtype`` (torch's name: ``Float``, ``BFloat16``), ``group_size``, ``input_dims`` and
    ``input_types`` (the text the trace holds), ``grid`` and ``block``; missing: ``<NA>``.
    ``kinds`` (default all of ``KINDS``) says which to read: ``copies``, ``collectives``,
    ``inputs``, ``launches``.

    >>> from hpcprof_kit import traces                                    # doctest: +SKIP
    >>> df = traces.load("runs/train_local_N1_R2_20260101-120000")      # doctest: +SKIP
    >>> copies = traces.event_args(df, kinds=["copies"])                  # doctest: +SKIP
    >>> df.loc[copies.index[copies.mem_kind == "Pageable"]]               # doctest: +SKIP
    """
    import pandas as pd

    kinds = _check_kinds(kinds)
    cols = sorted({c for k in kinds for c in _KIND_COLUMNS[k]}, key=COLUMNS.index)
    got = _matched(df, kinds)
    out = pd.DataFrame(index=pd.Index([], dtype=df.index.dtype), columns=["name", "size"])
    if got is not None and len(got):
        out = got.set_index("row")[["name", "size", *(c for c in COLUMNS if c in got)]]
    for col in out.columns:  # nullable from here on: a missing value stays missing
        out[col] = out[col].astype("Int64" if col in (*_INTS, "size") else object)
    if "collectives" in kinds:
        out = _collectives(out)
    if "copies" in kinds:
        out = _copies(df, out)
    out = out.reindex(columns=list(COLUMNS))
    for col in COLUMNS:
        if col not in cols:
            out[col] = None
        out[col] = out[col].astype("Int64" if col in _INTS else "string")
    out = out[out.notna().any(axis=1)]
    out.index.name = None
    order = df.index.get_indexer(out.index)
    return out.iloc[np.argsort(order, kind="stable")]


def _check_kinds(kinds: Any) -> tuple[str, ...]:
    if kinds is None:
        return tuple(KINDS)
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise ValueError(
            f"kinds={list(kinds)!r}: {bad or 'none'} not among the kinds of arguments kept; "
            f"choose from {list(KINDS)} (or leave kinds out for all)"
        )
    return kinds


def _file_frames(df: Any, kinds: tuple[str, ...]) -> Any:
    """The events carrying the kinds' arguments in every file the table's ranks came from."""
    import pandas as pd

    ranks = df.attrs.get("ranks", {})
    frames = []
    for rank in sorted(int(r) for r in df["rank"].unique()):
        meta = ranks.get(rank)
        if meta is None:
            raise TraceFormatError(
                f"rank {rank} of the table has no entry in df.attrs['ranks'], so the file "
                "holding its event arguments is unknown; pass the table traces.load returned "
                "(pandas keeps attrs through filters and sorts, not through every operation)"
            )
        for cycle, source in rank_files(meta):
            frame = pd.DataFrame(file_event_args(source, kinds))
            frame.insert(0, "cycle", np.int16(cycle))
            frame.insert(0, "rank", np.int32(rank))
            frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else None


def _matched(df: Any, kinds: tuple[str, ...]) -> Any:
    """The file events joined to the table's rows (key: rank, cycle, pid, tid, name, ts_ns;
    the n-th event of a key to the n-th row of it), with the row's label as ``row``."""
    events = _file_frames(df, kinds)
    if events is None or not len(events):
        return None
    rows = df.loc[df["name"].isin(set(events["name"])), _KEYS + ["corr"]]
    rows = rows.reset_index(names="row")
    for col in ("pid", "tid", "name"):
        rows[col] = rows[col].astype(str)
    rows["nth"] = rows.groupby(_KEYS, sort=False).cumcount()
    events["nth"] = events.groupby(_KEYS, sort=False).cumcount()
    return events.merge(rows, on=[*_KEYS, "nth"], how="inner")


def _collectives(out: Any) -> Any:
    """Bytes from elements and dtype; collectives named by ``nccl:all_reduce``-like annotations
    (older traces) sized by their first input."""
    if not len(out):
        return out
    names = out.get("name")
    out = out.copy()
    if names is not None:
        comm = names.str.extract(_COMM_ANNOTATION, expand=False)
        fill = comm.notna() & out["collective"].isna()
        out.loc[fill, "collective"] = comm[fill].str.replace("_", "", regex=False)
        first = out.loc[fill, "input_dims"].map(_first_elems)
        out.loc[fill, "msg_elems"] = first
        out.loc[fill, "dtype"] = out.loc[fill, "input_types"].map(_first_dtype)
    size = out["dtype"].map(DTYPE_BYTES).astype("Int64")
    sized = out["collective"].notna() & out["bytes"].isna()
    if sized.any():
        out.loc[sized, "bytes"] = out.loc[sized, "msg_elems"] * size[sized]
    return out


def _first_elems(dims: Any) -> int | None:
    try:
        first = msgspec.json.decode(dims)[0]
        return int(np.prod(first)) if isinstance(first, list) else None
    except (msgspec.DecodeError, IndexError, TypeError, ValueError):
        return None


def _first_dtype(types: Any) -> str | None:
    try:
        return _INPUT_DTYPES.get(msgspec.json.decode(types)[0])
    except (msgspec.DecodeError, IndexError, TypeError):
        return None


def _copies(df: Any, out: Any) -> Any:
    """Every device copy and memset row: kind and memory kind from its name, bytes from its
    args, else from its launch call's (ROCm writes the size there)."""
    import pandas as pd

    on_device = df["track"].isin(("memcpy", "memset"))
    rows = df.loc[on_device, ["rank", "corr", "name"]]
    if not len(rows):
        return out
    names = rows["name"].astype(str)
    kinds = {n: _copy_kind(n) for n in set(names)}
    copy = pd.DataFrame(index=rows.index)
    copy["copy_kind"] = names.map(lambda n: kinds[n][0])
    copy["mem_kind"] = names.map(lambda n: kinds[n][1])
    have = out["bytes"] if "bytes" in out else pd.Series(dtype=object)
    copy["bytes"] = have.reindex(copy.index)
    launch = _launch_sizes(out, df)
    if launch is not None and copy["bytes"].isna().any():
        keys = pd.MultiIndex.from_frame(rows[["rank", "corr"]])
        by_launch = launch.reindex(keys).to_numpy()
        copy["bytes"] = copy["bytes"].where(copy["bytes"].notna(), by_launch)
    rest = out.drop(index=copy.index, errors="ignore")
    merged = out.reindex(copy.index)
    for col in copy.columns:
        merged[col] = copy[col]
    return pd.concat([rest, merged])


def _launch_sizes(out: Any, df: Any) -> Any:
    """ROCm copy calls' ``size``, keyed by (rank, correlation id)."""
    import pandas as pd

    if "size" not in out or not out["size"].notna().any():
        return None
    sized = out.loc[out["size"].notna()]
    keys = df.loc[sized.index, ["rank", "corr"]]
    keys = keys[keys["corr"] >= 0]
    series = sized.loc[keys.index, "size"]
    series.index = pd.MultiIndex.from_frame(keys)
    return series[~series.index.duplicated()]


def _copy_kind(name: str) -> tuple[str | None, str | None]:
    """(copy kind, host side's memory kind) from a copy or memset event's name.

    >>> _copy_kind("Memcpy HtoD (Pageable -> Device)"), _copy_kind("Memcpy DtoH (Device -> Pinned)")
    (('HtoD', 'Pageable'), ('DtoH', 'Pinned'))
    >>> _copy_kind("Memcpy M2D (MEMORY(Unknown) -> DEVICE)"), _copy_kind("Memset (Device)")
    (('HtoD', None), (None, 'Device'))
    """
    if m := _MEMSET.match(name):
        return None, _MEM_KINDS.get(m.group(1))
    m = _COPY.match(name)
    if not m:
        return None, None
    kind = _XPU_KINDS.get(m.group(1), m.group(1) if m.group(1) in _CUDA_KINDS else None)
    src, dst = m.group(2), m.group(3)
    host_side = {"HtoD": src, "HtoH": src, "DtoH": dst}.get(kind or "", dst)
    return kind, _MEM_KINDS.get(host_side or "")


__all__ = ["COLUMNS", "DTYPE_BYTES", "KINDS", "event_args", "file_event_args"]
