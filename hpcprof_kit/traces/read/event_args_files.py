"""The events of one trace file that carry the arguments the rules need, read from the file
alone (streamed piece by piece, never the whole JSON; each file once per version and kinds).

An argument key (``"bytes"``, ``"grid"``...) marks the event to read: the object around the
args object around the key. Only those events are decoded, into the small structs below.

>>> import json, tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t.json"
>>> _ = p.write_text(json.dumps({"traceEvents": [
...     {"ph": "X", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2.0,
...      "args": {"grid": [4, 1, 1], "block": [128, 1, 1]}}]}))
>>> cols = file_event_args(str(p), ("launches",))
>>> cols["ts_ns"], cols["grid"], cols["block"]
([1500], ['[4, 1, 1]'], ['[128, 1, 1]'])
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from hpcprof_kit.traces.read.events import Scalar, _exact_ns_many
from hpcprof_kit.traces.read.memory_events import _object_around, decode_objects, file_version
from hpcprof_kit.traces.read.text import _pieces

# kind of argument -> the argument keys whose presence marks an event to read
KINDS: dict[str, tuple[bytes, ...]] = {
    "copies": (b"bytes", b"size"),  # device copies and memsets; ROCm's runtime copy calls
    # record_param_comms and newer NCCL kernels; older traces size nccl:* annotations by input
    "collectives": (b"Collective name", b"Input Dims"),
    "inputs": (b"Input Dims",),  # ops and annotations, with record_shapes=True
    "launches": (b"grid",),  # kernels (CUDA), launch calls (ROCm)
}
# the value columns read from a file, besides pid, tid, name and ts_ns
READ_COLUMNS = (
    "bytes", "size", "collective", "msg_elems", "dtype", "group_size", "input_dims",
    "input_types", "grid", "block", "correlation", "external_id",
)  # fmt: skip

# torch's ScalarType names (as record_param_comms writes them) -> bytes per element
DTYPE_BYTES = {
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Int": 4, "Long": 8, "Short": 2,
    "Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16,
    "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1,
}  # fmt: skip
_ANCHOR_TAIL = rb'"\s*:'
_TAIL = 64 * 1024  # bytes kept between pieces: an event cut by a piece's end
_TOO_FAR = 1 << 20  # an "event" this long is no Kineto event: its key is skipped


class _Args(msgspec.Struct, gc=False):
    bytes: Scalar = None
    size: Scalar = None
    collective: Scalar = msgspec.field(default=None, name="Collective name")
    in_elems: Scalar = msgspec.field(default=None, name="In msg nelems")
    dtype: Scalar = None
    group_size: Scalar = msgspec.field(default=None, name="Group size")
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input type")
    grid: msgspec.Raw = msgspec.Raw(b"")
    block: msgspec.Raw = msgspec.Raw(b"")
    # the ids the rules key arguments by, without matching the file to a table
    correlation: Scalar = None
    external_id: Scalar = msgspec.field(default=None, name="External id")


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    name: str | None = None
    pid: Scalar = None
    tid: Scalar = None
    ts: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"0"))
    args: _Args = msgspec.field(default_factory=_Args)


_DECODE = msgspec.json.Decoder(list[_Event])


def _anchors(kinds: tuple[str, ...]) -> re.Pattern[bytes]:
    keys = [re.escape(k) for kind in kinds for k in KINDS[kind]]
    return re.compile(b'"(?:' + b"|".join(keys) + b")" + _ANCHOR_TAIL)


def _event_objects(path: Path, kinds: tuple[str, ...]) -> tuple[list[bytes], int | None]:
    """The text of every event holding one of the kinds' keys in its args, and the file's
    ``baseTimeNanoseconds``."""
    anchor = _anchors(kinds)
    # a plain find runs far faster than the alternation's search: a piece without any key
    # as text (most of a trace) skips the search
    quoted = tuple(dict.fromkeys(b'"' + k + b'"' for kind in kinds for k in KINDS[kind]))
    base_re = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)')
    found: list[bytes] = []
    base = None
    buf = b""
    for piece in _pieces(path, []):  # a cut-short gzip ends early, as the loader's does
        buf += piece
        done = 0
        keyed = _holds_any(buf, quoted)
        while keyed and (m := anchor.search(buf, done)) is not None:
            span = _event_around(buf, m.start())
            if span is None:
                if len(buf) - m.start() < _TOO_FAR:
                    break  # cut off by the piece's end: wait for the next piece
                span = (-1, m.end())
            if span[0] >= 0:
                found.append(buf[span[0] : span[1]])
            done = max(span[1], m.end())
        if base is None and (b := base_re.search(buf)):
            base = int(b.group(1))
        buf = buf[max(done, len(buf) - _TAIL) :]
    return found, base


def _libc_memmem() -> Any:
    """The C library's ``memmem``, or None where there is none to call (Windows)."""
    try:
        import ctypes

        memmem = ctypes.CDLL(None).memmem
    except (OSError, AttributeError, TypeError):
        return None
    memmem.restype = ctypes.c_void_p
    memmem.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)
    return memmem


_MEMMEM = _libc_memmem()


def _holds_any(buf: bytes, needles: tuple[bytes, ...]) -> bool:
    """Whether ``buf`` holds any of ``needles`` as text.

    >>> _holds_any(b'{"args": {"bytes": 8}}', (b'"size"', b'"bytes"'))
    True
    >>> _holds_any(b'{"world_size": 8}', (b'"size"',))
    False
    """
    # every trace file is searched whole for the keys, most of them in vain: glibc's memmem
    # runs 2-3x faster than bytes.__contains__ on JSON, whose frequent characters (quotes,
    # colons, digits) defeat the latter's skip table
    if _MEMMEM is None:
        return any(k in buf for k in needles)
    return any(_MEMMEM(buf, len(buf), k, len(k)) is not None for k in needles)


def _event_around(buf: bytes, at: int) -> tuple[int, int] | None:
    """(start, end) of the event whose args hold the key at ``at``: the object around the
    args object around the key. None while cut off; (-1, -1) when there is none."""
    args = _object_around(buf, at)
    if args is None or args[0] < 0:
        return args
    return _object_around(buf, args[0])


def _decode(objects: list[bytes]) -> list[_Event]:
    return decode_objects(_DECODE, objects)


def _number(value: Any) -> int | None:
    """A whole number from a JSON number or numeric text (ROCm writes sizes as text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _text(raw: msgspec.Raw) -> str | None:
    out = bytes(raw).decode("utf-8", "replace")
    return out or None


@lru_cache(maxsize=32)
def _read(path: str, size: int, mtime_ns: int, kinds: tuple[str, ...]) -> dict[str, list]:
    objects, base = _event_objects(Path(path), kinds)
    events = [e for e in _decode(objects) if e.ph in ("X", "i", "I")]
    ts = _exact_ns_many([bytes(e.ts) for e in events]) if events else np.zeros(0, np.int64)
    # torch >= 2.4 writes ts relative to baseTimeNanoseconds; the loader adds it back
    if isinstance(base, int) and ts.size and int(ts.max()) < base:
        ts = ts + base
    out: dict[str, list] = {
        "pid": ["" if e.pid is None else str(e.pid) for e in events],
        "tid": ["" if e.tid is None else str(e.tid) for e in events],
        "name": ["" if e.name is None else e.name for e in events],
        "ts_ns": ts.tolist(),
    }
    out.update({c: [] for c in READ_COLUMNS})
    for e in events:
        a = e.args
        out["bytes"].append(_number(a.bytes))
        out["size"].append(_number(a.size))
        out["collective"].append(a.collective if isinstance(a.collective, str) else None)
        out["msg_elems"].append(_number(a.in_elems))
        out["dtype"].append(a.dtype if isinstance(a.dtype, str) else None)
        out["group_size"].append(_number(a.group_size))
        out["input_dims"].append(_text(a.input_dims))
        out["input_types"].append(_text(a.input_types))
        out["grid"].append(_text(a.grid))
        out["block"].append(_text(a.block))
        out["correlation"].append(_number(a.correlation))
        out["external_id"].append(_number(a.external_id))
    return out


def file_event_args(path: str, kinds: tuple[str, ...] = tuple(KINDS)) -> dict[str, list]:
    """The events of one trace file that carry the ``kinds``' arguments, as columns in file
    order (read once per version of the file and set of kinds)."""
    return _read(*file_version(path, "event arguments are"), tuple(kinds))


__all__ = ["KINDS", "READ_COLUMNS", "file_event_args"]
