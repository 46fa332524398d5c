"""The args of the ``[memory]`` events: kept by the loader as it reads each file, or read
back from the trace files a table came from.

``profile(profile_memory=True)`` writes one instant event per allocation and per free::

    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 15972,
     "tid": 15972, "ts": 4701987932099.992, "args": {"Total Reserved": 0,
     "Total Allocated": 16384, "Bytes": 16384, "Device Id": -1, "Device Type": 0, ...}}

The trace table keeps each of them as a row (track ``instant``, name ``[memory]``) but, like
every other row, not its args. The loader keeps those beside the table as it reads each file:
the compiled scanner reads them (a value outside the plain case is left to :func:`decoded`),
and ``df.attrs["ranks"][r]["event_args"]`` holds them per file under ``mem.`` names
(:func:`of_kept` gives them as a file's reader does). A file it kept none of (a cache copy of
old, a table whose attrs went through JSON) is read again: its ``[memory]`` objects alone
(streamed piece by piece, never the whole JSON). Either way the events are matched to the
table's rows by rank, schedule cycle, thread and time.

>>> import json, tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t.json"
>>> _ = p.write_text(json.dumps({"traceEvents": [
...     {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 10.5,
...      "args": {"Bytes": 64, "Total Allocated": 64, "Device Type": 0, "Device Id": -1}}]}))
>>> events = file_memory_events(str(p))
>>> events["ts_ns"].tolist(), events["bytes"].tolist(), events["device"].tolist()
([10500], [64], [-1])
"""

from __future__ import annotations

import os
import re
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from hpcprof_kit.errors import KitWarning, TraceFormatError
from hpcprof_kit.traces.read.events import Scalar, _exact_ns_many
from hpcprof_kit.traces.read.text import _MEMORY_NAME, _clean, _pieces

MEMORY_EVENT = "[memory]"
_BRACE = re.compile(rb"[{}]")
_BASE = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)')
_TAIL = 64 * 1024  # bytes kept between pieces: a [memory] object cut by a piece's end
# c10::DeviceType numbers torch writes as "Device Type"; host memory is device -1
DEVICE_TYPES = {0: "cpu", 1: "cuda", 2: "mkldnn", 5: "ideep", 6: "hip", 12: "xpu", 13: "mps"}
DEVICE_TYPES[20] = "privateuse1"
HOST_TYPES = (0, 2, 5)  # what torch's key_averages counts as CPU memory


class _MemArgs(msgspec.Struct, gc=False):
    bytes: Scalar = msgspec.field(default=None, name="Bytes")
    allocated: Scalar = msgspec.field(default=None, name="Total Allocated")
    reserved: Scalar = msgspec.field(default=None, name="Total Reserved")
    device_type: Scalar = msgspec.field(default=None, name="Device Type")
    device_id: Scalar = msgspec.field(default=None, name="Device Id")
    addr: Scalar = msgspec.field(default=None, name="Addr")


class _MemEvent(msgspec.Struct, gc=False):
    ph: str = ""
    name: str | None = None
    pid: Scalar = None
    tid: Scalar = None
    ts: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"0"))
    args: _MemArgs = msgspec.field(default_factory=_MemArgs)


_DECODE = msgspec.json.Decoder(list[_MemEvent])


def _object_around(buf: bytes, at: int) -> tuple[int, int] | None:
    """(start, end) of the JSON object holding the name at ``at``; None while it is cut off
    at the end of ``buf``; (-1, -1) when ``at`` lies in no object."""
    start = buf.rfind(b"{", 0, at)
    while start >= 0 and buf.count(b"{", start, at) <= buf.count(b"}", start, at):
        start = buf.rfind(b"{", 0, start)  # that object (args) closed before the name
    if start < 0:
        return -1, -1
    # the common layout, in C-level calls: the event's braces and one args object after the name
    first = buf.find(b"}", at)
    opened = buf.count(b"{", start, first)
    if first >= 0 and opened <= 2:
        end = first if opened == 1 else buf.find(b"}", first + 1)
        if end >= 0 and buf.find(b"{", first, end) < 0:
            return start, end + 1
    depth = 0
    for m in _BRACE.finditer(buf, start):
        depth += 1 if m.group() == b"{" else -1
        if depth == 0:
            return start, m.end()
    return None


def _find_objects(buf: bytes, found: list[bytes]) -> int:
    """Add the text of every whole object naming ``[memory]`` in ``buf`` to ``found``; return
    where the search ended (before an object cut off at the end of ``buf``)."""
    done = 0
    while (at := buf.find(_MEMORY_NAME, done)) >= 0:
        span = _object_around(buf, at)
        if span is None:
            break
        if span[0] >= 0:
            found.append(buf[span[0] : span[1]])
        done = max(span[1], at + len(_MEMORY_NAME))
    return done


_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}]')  # a JSON string (braces in it are text) or a brace


def objects_in(text: bytes) -> list[bytes]:
    """The text of every top-level object in ``text`` (whole events, comma-separated) that
    names ``[memory]``, found by its braces outside strings (the file's reader above counts
    every brace: it reads pieces of a file, here the events are whole)."""
    found, depth, start = [], 0, 0
    for m in _TOKEN.finditer(text):
        token = m.group()
        if token == b"{":
            depth += 1
            start = m.start() if depth == 1 else start
        elif token == b"}" and depth:
            depth -= 1
            if depth == 0 and text.find(_MEMORY_NAME, start, m.end()) >= 0:
                found.append(text[start : m.end()])
    return found


def _memory_objects(path: Path) -> tuple[list[bytes], int | None]:
    """The text of every object naming ``[memory]`` in the file, and ``baseTimeNanoseconds``."""
    found: list[bytes] = []
    base = None
    buf = b""
    for piece in _pieces(path, []):  # a cut-short gzip ends early, as the loader's does
        buf += piece
        done = _find_objects(buf, found)
        if base is None and (m := _BASE.search(buf)):
            base = int(m.group(1))
        buf = buf[max(done, len(buf) - _TAIL) :]
    return found, base


def _decode(objects: list[bytes]) -> list[_MemEvent]:
    return decode_objects(_DECODE, objects)


def decode_objects(decoder: msgspec.json.Decoder, objects: list[bytes]) -> list:
    """The JSON objects cut from a trace, decoded by ``decoder`` (of a ``list[...]``) at once;
    where that fails, one by one, repairing what the loader repairs and dropping the rest."""
    try:
        return decoder.decode(b"[" + b",".join(objects) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    events = []
    for text in objects:  # one by one, repairing what the loader repairs
        for candidate in (text, _clean(text)):
            try:
                (event,) = decoder.decode(b"[" + candidate + b"]")
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            events.append(event)
            break
    return events


def _ints(values: list[Any], missing: int) -> tuple[np.ndarray, np.ndarray]:
    """Whole numbers as int64 and where they were present (a number, not null or text, within
    int64), exact: a float64 holds them only below 2**53, so larger ones are read one by one."""
    try:  # the common case, in C: every value a number (NumPy reads a null as nan)
        out = np.fromiter(values, np.float64, len(values))
        if not np.isnan(out).any() and (np.abs(out) < 2**53).all():
            return out.astype(np.int64), np.ones(len(values), dtype=bool)
    except (TypeError, ValueError):
        pass
    ok = np.array([isinstance(v, int | float) and -(2**63) <= v < 2**63 for v in values], bool)
    out = np.array([int(v) if k else missing for v, k in zip(values, ok, strict=True)])
    return out.astype(np.int64), ok


def _texts(values: list[Any]) -> np.ndarray:
    """pid / tid values as the trace table's text ("" for null), each distinct value once."""
    memo = {v: "" if v is None else str(v) for v in set(values)}
    return np.array(list(map(memo.__getitem__, values)), dtype=object)


@lru_cache(maxsize=16)
def _read(path: str, size: int, mtime_ns: int) -> dict[str, np.ndarray]:
    objects, base = _memory_objects(Path(path))
    return finished(decoded(objects), base)


# the args of the raw columns, in the compiled scanner's order (_scan.c's M_*)
RAW_ARGS = ("bytes", "allocated", "reserved", "device_type", "device_id", "addr")


def decoded(objects: list[bytes]) -> dict[str, np.ndarray]:
    """The ``[memory]`` events among ``objects`` as raw columns (:func:`finished` makes them
    the table's): pid and tid as text, ts as written, each arg with where it was a number."""
    events = [e for e in _decode(objects) if e.ph in ("i", "I") and e.name == MEMORY_EVENT]
    ts = _exact_ns_many([bytes(e.ts) for e in events]) if events else np.zeros(0, np.int64)
    args = [e.args for e in events]
    raw = {"pid": _texts([e.pid for e in events]), "tid": _texts([e.tid for e in events]),
           "ts_ns": ts}  # fmt: skip
    for col in RAW_ARGS:
        raw[col], raw[f"has_{col}"] = _ints([getattr(a, col) for a in args], 0)
    return raw


def scanned(block: np.ndarray, keys: list[tuple]) -> dict[str, np.ndarray]:
    """The raw columns of the scanner's memory rows (``_scan.c``: key code, ts, the args in
    ``RAW_ARGS`` order, 0 where absent, and a bit each for which were numbers); ``keys``: the
    (ph, cat, name, pid, tid) of each key code."""
    code, ts, *values, present = block
    texts = _texts([k[3] for k in keys] + [k[4] for k in keys])
    raw = {"pid": texts[: len(keys)][code], "tid": texts[len(keys) :][code], "ts_ns": ts}
    for i, (col, v) in enumerate(zip(RAW_ARGS, values, strict=True)):
        raw[col], raw[f"has_{col}"] = v, (present >> i & 1).astype(bool)
    return raw


def finished(raw: dict[str, np.ndarray], base: Any) -> dict[str, np.ndarray]:
    """Raw columns (:func:`decoded`, :func:`scanned`) as :func:`file_memory_events` gives
    them: ts after ``base``, the device index and type."""
    return _finish(raw, _after_base(raw["ts_ns"], base))


def _after_base(ts: np.ndarray, base: Any) -> np.ndarray:
    """One file's ts: torch >= 2.4 writes them relative to baseTimeNanoseconds; the loader
    adds it back."""
    if isinstance(base, int) and ts.size and int(ts.max()) < base:
        return ts + base
    return ts


def _finish(raw: dict[str, np.ndarray], ts: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`finished` of raw columns whose ts are already after their file's base (the
    columns of several files joined)."""
    kind = np.where(raw["has_device_type"], raw["device_type"], 0)  # none: host memory
    host = np.isin(kind, HOST_TYPES)
    device = np.where(host, -1, np.where(raw["has_device_id"], np.maximum(raw["device_id"], 0), 0))
    kinds, which = np.unique(kind, return_inverse=True)
    names = np.array([DEVICE_TYPES.get(k, f"type {k}") for k in kinds.tolist()], dtype=object)
    return {
        "pid": raw["pid"],
        "tid": raw["tid"],
        "ts_ns": ts,
        "bytes": raw["bytes"],
        "has_bytes": raw["has_bytes"],
        "allocated": raw["allocated"],
        "has_allocated": raw["has_allocated"],
        "reserved": raw["reserved"],
        "has_reserved": raw["has_reserved"],
        "device": device.astype(np.int32),
        "device_type": names[which.reshape(-1)],
        "addr": raw["addr"],
        "has_addr": raw["has_addr"],
        "bad_ts": ts == np.iinfo(np.int64).min,
    }


def file_memory_events(path: str) -> dict[str, np.ndarray]:
    """The ``[memory]`` events of one trace file as columns, in file order (read once per
    version of the file: a rewritten file is read again)."""
    return _read(*file_version(path, "the [memory] events' sizes are"))


def file_version(path: str, what: str) -> tuple[str, int, int]:
    """(absolute path, size, mtime in ns) of a file a trace table was loaded from, the key
    its readers cache by; a TraceFormatError saying ``what`` is read from it when it cannot
    be read now."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise TraceFormatError(
            f"the trace file {path!r} that the table was loaded from cannot be read now "
            f"({exc.strerror}); {what} read from it: load the traces again from where they "
            "are now (traces.load(path))"
        ) from None
    return os.path.abspath(path), st.st_size, st.st_mtime_ns


# the loader's kept [memory] columns, beside the rules' arguments of the same file
KEPT_PREFIX = "mem."


def kept(slices: list, keys: list[tuple], base: Any) -> dict[str, np.ndarray]:
    """One file's [memory] events as raw columns (:func:`decoded`) and its base, under the
    names the loader keeps them by (:func:`of_kept` finishes them when they are asked for),
    from what it kept of each slice: the scanner's rows (its columns as int64 bytes, and its
    odd rows decoded by row) or raw columns; ``keys``: the (ph, cat, name, pid, tid) of each
    key code."""
    blocks = [b for b in slices if isinstance(b, tuple)]
    if len(blocks) == len(slices):  # the common case: every slice scanned
        slices = [_fixed(blocks, keys)]
    else:
        slices = [_fixed([b], keys) if isinstance(b, tuple) else b for b in slices]
    raw = {KEPT_PREFIX + c: np.concatenate([b[c] for b in slices]) for c in slices[0]}
    raw[KEPT_PREFIX + "base"] = np.array([base] if isinstance(base, int) else [], np.int64)
    return raw


def _fixed(blocks: list[tuple], keys: list[tuple]) -> dict[str, np.ndarray]:
    """:func:`scanned` of the scanner's rows of some slices, joined, their odd rows replaced
    by the same events decoded (dropped where one is not a [memory] event after all)."""
    if not blocks:
        return decoded([])
    columns = zip(*(arrays for arrays, _ in blocks), strict=True)
    block = np.vstack([np.frombuffer(b"".join(c), np.int64) for c in columns])
    raw = scanned(block, keys)
    keep, at = None, 0
    for arrays, odd in blocks:
        for row, one in odd.items():
            if len(one["ts_ns"]) != 1:
                keep = np.ones(block.shape[1], dtype=bool) if keep is None else keep
                keep[at + row] = False
                continue
            for col, values in raw.items():
                values[at + row] = one[col][0]
        at += len(arrays[0]) // 8
    return raw if keep is None else {c: v[keep] for c, v in raw.items()}


def of_kept(args: dict[str, np.ndarray] | None) -> dict[str, np.ndarray] | None:
    """The [memory] columns the loader kept among one file's kept arguments, as
    :func:`file_memory_events` gives them; None when it kept none."""
    raw = _raw_of_kept(args)
    return None if raw is None else _finish(raw, raw["ts_ns"])


def _raw_of_kept(args: dict[str, np.ndarray] | None) -> dict[str, np.ndarray] | None:
    """The raw ``[memory]`` columns among one file's kept arguments, their ts after the
    file's base (:func:`_finish` makes them the table's); None when it kept none."""
    if not args or KEPT_PREFIX + "base" not in args:
        return None
    raw = {k[len(KEPT_PREFIX) :]: v for k, v in args.items() if k.startswith(KEPT_PREFIX)}
    base = raw.pop("base")
    raw["ts_ns"] = _after_base(raw["ts_ns"], int(base[0]) if base.size else None)
    return raw


def _kept_raw(rank_meta: dict[str, Any], source: str) -> dict[str, np.ndarray] | None:
    """:func:`_raw_of_kept` of ``source``'s kept arguments; None when the loader kept none
    (an older cache copy, attrs that went through JSON and hold the summary alone)."""
    args = rank_meta.get("event_args")
    return _raw_of_kept(args.get(source) if hasattr(args, "by_file") else None)


def rank_files(meta: dict[str, Any]) -> list[tuple[int, str]]:
    """(cycle, source file) of each file one rank of a trace table was loaded from."""
    sources = meta.get("sources") or [meta.get("source")]
    cycles = meta.get("cycles") or [meta.get("cycle", 0)]
    return [(int(c), str(s)) for c, s in zip(cycles, sources, strict=True) if s]


def read_events(ranks: dict[int, dict[str, Any]], wanted: list[int]) -> Any:
    """The ``[memory]`` events of the ``wanted`` ranks' files, one row each, in file order."""
    import pandas as pd

    kept: list[dict[str, np.ndarray]] = []  # the loader's raw columns, finished at once
    read: list[dict[str, np.ndarray]] = []  # files read again, finished each
    for rank in wanted:
        meta = ranks.get(rank)
        if meta is None:
            raise TraceFormatError(
                f"rank {rank} has [memory] rows but no entry in df.attrs['ranks'], so the file "
                "holding their sizes is unknown; pass the table traces.load returned (pandas "
                "keeps attrs through filters and sorts, not through every operation)"
            )
        for cycle, source in rank_files(meta):
            raw = _kept_raw(meta, source)
            cols = raw if raw is not None else file_memory_events(source)
            n = len(cols["ts_ns"])
            own = {"rank": np.full(n, rank, dtype=np.int32),
                   "cycle": np.full(n, cycle, dtype=np.int16), **cols,
                   "order": np.arange(n, dtype=np.int64)}  # fmt: skip
            (kept if raw is not None else read).append(own)
    parts = []
    if kept:
        raw = {c: np.concatenate([k[c] for k in kept]) for c in kept[0]}
        parts.append({"rank": raw["rank"], "cycle": raw["cycle"],
                      **_finish(raw, raw["ts_ns"]), "order": raw["order"]})  # fmt: skip
    parts += read
    if not parts:
        return None
    cols = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    keep = ~cols.pop("bad_ts")  # indexing copies: the cached arrays stay untouched
    return pd.DataFrame({c: v[keep] for c, v in cols.items()}, copy=False)


def match_rows(rows: Any, events: Any) -> Any:
    """The file events matching the table's ``[memory]`` rows (key: rank, cycle, pid, tid,
    ts_ns), each row once, in file order; the row's ``step`` beside it. Rows that no event
    matches (the file changed since it was loaded) are dropped with a warning."""
    import pandas as pd

    events = events.iloc[np.lexsort((events["order"], events["cycle"], events["rank"]))]
    nr = len(rows)
    key = []  # rank, cycle, pid, tid, ts: the table's rows first, then the events
    for col in ("rank", "cycle", "pid", "tid", "ts_ns"):
        both = np.concatenate([rows[col].to_numpy(), events[col].to_numpy()])
        key.append(pd.factorize(both)[0] if col in ("pid", "tid") else both.astype(np.int64))
    # each key's rows, then its events in file order; the k-th event of a key matches while
    # the key has more than k rows
    at = np.lexsort((np.arange(len(key[0])), *key[::-1]))
    head = np.zeros(at.size, dtype=bool)
    head[:1] = True
    for k in key:
        ks = k[at]
        head[1:] |= ks[1:] != ks[:-1]
    group = np.cumsum(head) - 1
    start = np.flatnonzero(head)
    is_row = at < nr
    n_rows = np.bincount(group[is_row], minlength=start.size)
    nth = np.arange(at.size) - start[group] - n_rows[group]
    ok = ~is_row & (nth < n_rows[group])
    first_row = at[start]  # a key's first row (when it has one: n_rows > 0)
    step = rows["step"].to_numpy()[np.minimum(first_row, max(nr - 1, 0))] if nr else first_row
    picked = np.sort(at[ok] - nr)  # positions in the events' file order
    got = events.iloc[picked].copy()
    by_event = np.empty(at.size, dtype=np.int64)
    by_event[at[ok] - nr] = step[group[ok]]
    got["step"] = by_event[picked] if picked.size else np.zeros(0, dtype=np.int64)
    lost = len(rows) - len(got)
    if lost:
        warnings.warn(
            f"{lost} of {len(rows)} [memory] rows of the table have no matching event in "
            "their trace file (rewritten since it was loaded?); they are left out: load the "
            "traces again to see them",
            KitWarning,
            stacklevel=3,
        )
    return got


__all__ = ["MEMORY_EVENT", "file_memory_events", "match_rows", "rank_files", "read_events"]
