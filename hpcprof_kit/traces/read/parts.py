"""One rank's columns before they become the trace table, and joining ranks into one table.

A :class:`Part` holds plain NumPy arrays (category columns as codes plus their labels) and the
rank's metadata. The trace table (a DataFrame) is built once, at the end, over those arrays
without copying them: building a DataFrame per rank and then concatenating the frames moved
every byte two more times, and on a machine where fresh memory is slow to touch that cost as
much as a third of the parse.

A part is stored as an uncompressed ``.npz`` of its arrays plus the metadata as JSON: the
loader's cache and the worker processes (which hand their parts back through shared memory)
use the same layout.

>>> import numpy as np
>>> a = Part({"name": np.array([0, 1, 0], dtype=np.int32)}, {"name": ["mm", "add"]}, 0, {})
>>> b = Part({"name": np.array([0, 1], dtype=np.int32)}, {"name": ["relu", "mm"]}, 1, {})
>>> df = join([a, b])
>>> list(df["name"]), list(df["name"].cat.categories)
(['mm', 'add', 'mm', 'relu', 'mm'], ['mm', 'add', 'relu'])
"""

from __future__ import annotations

import json
import struct
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hpcprof_kit.traces.read.kept_args import kept_of, pack, unpack
from hpcprof_kit.traces.read.memory_events import KEPT_PREFIX

_META = "__meta__"
_ARGS = "args."  # the kept event arguments' arrays


@dataclass
class Part:
    """One rank's trace: its columns in table order, category labels, rank and metadata."""

    columns: dict[str, np.ndarray]  # numeric columns, and the codes of category columns
    labels: dict[str, list[str]]  # category column -> its labels, indexed by code
    rank: int
    meta: dict[str, Any] = field(default_factory=dict)
    # the event arguments the rules read (kept_args.COLUMNS), and the [memory] events' columns
    # under memory_events.KEPT_PREFIX names when they were kept too; None: not kept
    args: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def frame(self) -> Any:
        """This part as a trace table, over the same arrays (no copy)."""
        return _frame(self.columns, self.labels, rank_meta([self]))


def join(parts: list[Part]) -> Any:
    """Several parts as one trace table: rows in part order, category labels united in
    order of first appearance, ``attrs["ranks"]`` sorted by rank. Each column is copied once.
    """
    if len(parts) == 1:
        return parts[0].frame()
    first = parts[0]
    columns: dict[str, np.ndarray] = {}
    labels: dict[str, list[str]] = {}
    for col in first.columns:
        if col in first.labels:
            labels[col], columns[col] = _united(col, parts)
        else:
            columns[col] = np.concatenate([p.columns[col] for p in parts])
    return _frame(columns, labels, rank_meta(parts))


def rank_meta(parts: list[Part]) -> dict[int, dict[str, Any]]:
    """Each rank's metadata; a rank in several parts (one per schedule cycle) keeps its first
    part's, with ``cycles`` and ``sources`` listing every part, ``events`` their sum and
    ``arg_keys`` the argument keys any of them holds (None when one does not say); and
    ``event_args`` the arguments the loader kept of each (:class:`~.kept_args.KeptArgs`)."""
    ranks: dict[int, dict[str, Any]] = {}
    ordered = sorted(parts, key=lambda p: (p.rank, p.meta.get("cycle", 0)))
    for p in ordered:
        if p.rank not in ranks:
            ranks[p.rank] = dict(p.meta)
            continue
        meta = ranks[p.rank]
        if "cycles" not in meta:
            meta["cycles"], meta["sources"] = [meta.get("cycle", 0)], [meta.get("source")]
        meta["cycles"].append(p.meta.get("cycle", 0))
        meta["sources"].append(p.meta.get("source"))
        meta["events"] = meta.get("events", 0) + p.meta.get("events", 0)
        meta["skipped"] = meta.get("skipped", 0) + p.meta.get("skipped", 0)
        meta["warnings"] = [*meta.get("warnings", []), *p.meta.get("warnings", [])]
        keys, more = meta.get("arg_keys"), p.meta.get("arg_keys")
        meta["arg_keys"] = None if keys is None or more is None else sorted({*keys, *more})
    by_rank: dict[int, list[Part]] = {}
    for p in ordered:
        by_rank.setdefault(p.rank, []).append(p)
    for rank, meta in ranks.items():
        kept = kept_of(by_rank[rank])
        if kept is not None:
            meta["event_args"] = kept
    return ranks


def _united(col: str, parts: list[Part]) -> tuple[list[str], np.ndarray]:
    """One label list for a category column over all parts, and every part's codes over it."""
    index: dict[str, int] = {}
    remaps = [
        np.array([index.setdefault(label, len(index)) for label in p.labels[col]] or [0])
        for p in parts
    ]
    dtype = code_dtype(len(index))
    out = np.empty(sum(len(p.columns[col]) for p in parts), dtype=dtype)
    at = 0
    for p, remap in zip(parts, remaps, strict=True):
        codes = p.columns[col]
        out[at : at + len(codes)] = remap.astype(dtype)[codes]
        at += len(codes)
    return list(index), out


def code_dtype(n_labels: int) -> type:
    """The smallest integer type pandas keeps the codes of ``n_labels`` categories in.

    >>> code_dtype(100).__name__, code_dtype(5000).__name__, code_dtype(40000).__name__
    ('int8', 'int16', 'int32')
    """
    return np.int8 if n_labels < 2**7 else np.int16 if n_labels < 2**15 else np.int32


def _frame(columns: dict[str, np.ndarray], labels: dict[str, list[str]], ranks: dict) -> Any:
    import pandas as pd

    data = {}
    for col, values in columns.items():
        if col in labels:
            dtype = pd.CategoricalDtype(labels[col] or [""])
            data[col] = pd.Categorical.from_codes(values, dtype=dtype, validate=False)
        else:
            data[col] = values
    df = pd.DataFrame(data, copy=False)
    df.attrs["ranks"] = dict(sorted(ranks.items()))
    return df


def save(fh: Any, part: Part) -> None:
    """Write ``part`` to an open binary file as an uncompressed ``.npz``."""
    arrays: dict[str, np.ndarray] = {}
    columns = []
    for col, values in part.columns.items():
        if col in part.labels:
            arrays[f"{col}.codes"] = values
            arrays[f"{col}.labels"] = np.array(part.labels[col], dtype=str)
            columns.append((col, "category"))
        else:
            arrays[col] = values
            columns.append((col, str(values.dtype)))
    kept = None if part.args is None else len(part.args["corr"])
    if kept:  # the kept event arguments: one integer array (text as codes) and the labels
        arrays[f"{_ARGS}ints"], arrays[f"{_ARGS}labels"] = pack(part.args)
    memory = [c for c in part.args or () if c.startswith(KEPT_PREFIX)]
    for col in memory:  # the kept [memory] columns as they are (their texts as str arrays)
        values = part.args[col]
        arrays[_ARGS + col] = values.astype(str) if values.dtype == object else values
    meta = {"columns": columns, "ranks": {str(part.rank): part.meta}, "args": kept,
            "memory": memory or None}  # fmt: skip
    arrays[_META] = np.array(json.dumps(meta, default=str))
    np.savez(fh, **arrays)


def read(place: Any, *, mapped: bool = False) -> Part:
    """A part stored by :func:`save` (raises OSError/ValueError/KeyError if damaged).

    ``mapped`` maps the stored arrays read-only instead of reading them (``place`` must then
    be a path): for a part that :func:`join` copies at once, such as a worker's hand-back.
    """
    with np.load(place, allow_pickle=False) as z:
        meta = json.loads(str(z[_META]))
        spans = _spans(place) if mapped else {}
        columns, labels = {}, {}
        for col, dtype in meta["columns"]:
            key = f"{col}.codes" if dtype == "category" else col
            view = _mapped(place, spans[key]) if key in spans else None
            columns[col] = z[key] if view is None else view
            if dtype == "category":
                labels[col] = z[f"{col}.labels"].tolist()
        kept = meta.get("args")  # the rows kept; None: not kept
        args = None
        if kept is not None:
            args = unpack(z[f"{_ARGS}ints"], z[f"{_ARGS}labels"]) if kept else unpack()
            for col in meta.get("memory") or ():
                values = z[_ARGS + col]
                args[col] = values.astype(object) if values.dtype.kind == "U" else values
    ((rank, rank_meta),) = meta["ranks"].items()
    return Part(columns, labels, int(rank), rank_meta, args)


def _spans(place: Any) -> dict[str, int]:
    """Array name -> where its ``.npy`` starts in an uncompressed ``.npz`` (stored members)."""
    spans = {}
    with zipfile.ZipFile(place) as zf, open(place, "rb") as fh:
        for info in zf.infolist():
            if info.compress_type != zipfile.ZIP_STORED or not info.filename.endswith(".npy"):
                continue
            fh.seek(info.header_offset)
            local = fh.read(30)  # the local file header; name and extra field follow it
            name_len, extra_len = struct.unpack("<HH", local[26:30])
            spans[info.filename[: -len(".npy")]] = info.header_offset + 30 + name_len + extra_len
    return spans


def _mapped(place: Any, start: int) -> np.ndarray | None:
    """The 1-d array whose ``.npy`` starts at byte ``start``, mapped; None if it cannot be."""
    fmt = np.lib.format
    headers = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
    with open(place, "rb") as fh:
        fh.seek(start)
        header = headers.get(fmt.read_magic(fh))
        if header is None:
            return None
        shape, fortran, dtype = header(fh)
        offset = fh.tell()
    if dtype.hasobject or fortran or len(shape) != 1 or shape[0] == 0:
        return None
    return np.memmap(place, dtype=dtype, mode="r", offset=offset, shape=shape)
