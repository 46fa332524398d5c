"""Which fields of a chrome-trace event the trace table keeps, and how they become columns.

A slice of events is decoded by ``msgspec`` into the small ``Event`` structs below (every other
field is skipped while parsing), then ``Columns.add`` gathers each field of the slice into a
NumPy array with ``map(attrgetter(...))`` into ``np.fromiter``, so the loop over events runs in
C. Categorical fields are coded through one key per ``(ph, cat, name, pid, tid)``; the column
codes are split out of the distinct keys when the file is done.

>>> events = FAST.decode(b'[{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,'
...                      b' "tid": 1, "ts": 10.5, "dur": 2.0, "args": {"External id": 7}}]')
>>> cols = Columns()
>>> cols.add(events, exact=False)  # the events left out, with why
[]
>>> columns, vocab = cols.finish()
>>> int(columns["ts_ns"][0]), int(columns["ext_id"][0]), vocab["name"]
(10500, 7, ['aten::mm'])
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from itertools import compress
from operator import attrgetter, itemgetter
from typing import Any

import msgspec
import numpy as np

# The track vocabulary, shared by every format.
TRACKS = (
    "cpu",  # host ops, annotations, python functions
    "runtime",  # CUDA/HIP/XPU runtime and driver calls on the host
    "gpu",  # device compute kernels
    "comm",  # communication (device kernels matching a comm pattern, or gloo/c10d host work)
    "memcpy",  # device memory copies
    "memset",  # device memory sets
    "gpu_annotation",  # gpu_user_annotation spans
    "instant",  # instant events ([memory], marks)
)

KEPT_PHASES = frozenset({"X", "i", "I"})  # rows of the table; M events feed process names
NOT_AN_OBJECT = "\0"  # the phase given to an array item that is not a JSON object
BAD_NS = np.iinfo(np.int64).min  # an exact time that could not be read
MAX_US = 9.2e15  # |µs| from here on overflows int64 ns

# A json value may be a number, a string (string pids) or null; wide ints stay Python ints.
Scalar = int | float | str | None


class _Args(msgspec.Struct, gc=False, frozen=True):
    # -1 defaults keep id lists all-int, so NumPy converts them on its fast path
    correlation: Scalar = -1
    external_id: Scalar = msgspec.field(default=-1, name="External id")
    device: Scalar = -1
    stream: Scalar = -1
    sycl_queue: Scalar = msgspec.field(default=-1, name="sycl queue")
    name: Scalar = None  # process_name / thread_name metadata
    # the argument keys the rules read (ARG_KEYS), and the values they read (kept_args.py),
    # as their JSON text (Raw: not decoded here)
    bytes: msgspec.Raw = msgspec.Raw(b"")
    size: msgspec.Raw = msgspec.Raw(b"")
    collective: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Collective name")
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    grid: msgspec.Raw = msgspec.Raw(b"")
    in_elems: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="In msg nelems")
    dtype: msgspec.Raw = msgspec.Raw(b"")
    group_size: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Group size")
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input type")


_NO_ARGS = _Args()
# the argument keys a file's kept events hold (in the compiled scanner's bit order) and the
# _Args field of each: the rules' arguments are looked for again only in files holding them
ARG_KEYS = ("bytes", "size", "Collective name", "Input Dims", "grid")
_ARG_KEY_FIELDS = {"bytes": "bytes", "size": "size", "Collective name": "collective",
                   "Input Dims": "input_dims", "grid": "grid"}  # fmt: skip
_PRESENT = msgspec.Raw(b"1")
# the values the rules read, kept as their JSON text: the key and its _Args field
_RULE_FIELDS = {"bytes": "bytes", "Collective name": "collective", "In msg nelems": "in_elems",
                "dtype": "dtype", "Group size": "group_size", "Input type": "input_types"}  # fmt: skip


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: str | None = None
    pid: Scalar = None
    tid: Scalar = None
    ts: float | None = 0.0  # absent -> 0.0 keeps the column all-float (NumPy's fast path)
    dur: float | None = 0.0
    args: _Args = _NO_ARGS


class _ExactEvent(msgspec.Struct, gc=False):
    """Same fields, but ``ts`` kept as its JSON text so epoch µs with decimals stays exact."""

    ph: str = ""
    cat: str | None = None
    name: str | None = None
    pid: Scalar = None
    tid: Scalar = None
    ts: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"0"))  # absent: 0
    dur: float | None = 0.0
    args: _Args = _NO_ARGS


FAST = msgspec.json.Decoder(list[_Event])
EXACT = msgspec.json.Decoder(list[_ExactEvent])  # its Raw values pin their input: give it bytes
ANY = msgspec.json.Decoder()


def _exact_ns(raw: msgspec.Raw) -> int:
    """ns of one ``ts`` text; ``BAD_NS`` when it is null, not a number or beyond int64."""
    raw = bytes(raw)
    whole, _, frac = raw.partition(b".")
    if frac.isdigit() and (whole.isdigit() or whole[1:].isdigit()):
        ns = abs(int(whole)) * 1000 + round(int(frac) * 10 ** (3 - len(frac)))
        ns = -ns if whole.startswith(b"-") else ns
    else:
        try:  # other layouts (exponent, many decimals, a number written as a string)
            ns = round(Decimal(raw.strip(b'"').decode()) * 1000)
        except (ArithmeticError, ValueError):  # null, not a number, infinite
            return BAD_NS
    return ns if BAD_NS < ns < -BAD_NS else BAD_NS


_DIGIT_VALUES = 10 ** np.arange(18, -1, -1, dtype=np.int64)  # 10**18 ... 10**0


def _exact_ns_many(raws: list) -> np.ndarray:
    """ns of many ``ts`` texts at once when they share one layout (``1712195495519695.812``).

    Traces write every time with the same digit count, so the texts form an (n, width) grid
    of digits that NumPy turns into integers; any other layout is read one by one.
    """
    n = len(raws)
    joined = b"".join(raws)
    first = bytes(raws[0]) if n else b""
    dot = first.find(b".")
    width = len(first)
    places = width - dot - 1
    if n and len(joined) == n * width and 0 < dot <= 16 and 0 < places <= 3:
        grid = np.frombuffer(joined, np.uint8).reshape(n, width)
        digits = np.delete(grid, dot, axis=1) - np.uint8(48)  # "." out; non-digits wrap > 9
        # 16 whole digits make 19-digit ns: below 9e18 they fit in int64
        fits = dot < 16 or (digits[:, 0] <= 8).all()
        if fits and (grid[:, dot] == 46).all() and (digits <= 9).all():
            ns = digits.astype(np.int64) @ _DIGIT_VALUES[-digits.shape[1] :]
            return ns * 10 ** (3 - places)
    return np.fromiter(map(_exact_ns, raws), np.int64, n)


class _Codes(dict):
    """Value -> code, adding each new value as it is first seen (``dict`` lookups stay in C)."""

    def __missing__(self, value: Any) -> int:
        code = self[value] = len(self)
        return code


_PH = attrgetter("ph")
_ARGS = attrgetter("args")
_KEY = attrgetter("ph", "cat", "name", "pid", "tid")
_GET = {c: attrgetter(c) for c in ("ts", "dur")}
_ID_ARGS = {"corr": "correlation", "ext_id": "external_id", "device": "device"}
_ID_GET = {
    k: attrgetter(k) for k in ("correlation", "external_id", "device", "stream", "sycl_queue")
}
_IS_INSTANT = {"X": False, "i": True, "I": True}


class Columns:
    """Growing columns: one list of NumPy arrays per column, codes for categorical ones.

    Each field is gathered with ``map(attrgetter(...))`` straight into ``np.fromiter``: the
    loop over events runs in C, and no intermediate list is built on the common path.
    """

    CATEGORICAL = ("cat", "name", "pid", "tid")
    NUMERIC = ("ts_ns", "dur_ns", "corr", "ext_id", "device", "stream")

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {c: [] for c in ("key",) + self.NUMERIC}
        self.keys = _Codes()  # (ph, cat, name, pid, tid) -> code
        self.raw_keys: dict[bytes, int] = {}  # their JSON text (the compiled scanner's) -> code
        self.wide_ints = 0

    def new_key(self, raw: bytes) -> int | None:
        """The code of a key the compiled scanner met first as text: ``ph``, then the JSON of
        cat, name, pid and tid (empty where absent), NUL-separated. None: the scanner leaves
        the slice to msgspec."""
        ph, *rest = raw.split(b"\0")
        try:
            key = (ph.decode(), *(ANY.decode(part) if part else None for part in rest))
        except (UnicodeDecodeError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        code = self.raw_keys[raw] = self.keys[key]
        return code

    def add_scanned(self, arrays: tuple[bytes, ...]) -> None:
        """Append the columns the compiled scanner read: key codes, ts and dur in ns, then
        correlation, External id, device and stream (each as int64 bytes)."""
        key, *numeric = (np.frombuffer(a, np.int64) for a in arrays)
        self.parts["key"].append(key.astype(np.int32))
        for col, values in zip(self.NUMERIC, numeric, strict=True):
            self.parts[col].append(values)

    def _ids(self, args: list, key: str) -> np.ndarray:
        """Integer ids (correlation, stream...) -> int64, -1 where absent or unusable."""
        get = _ID_GET[key]
        try:
            return np.fromiter(map(get, args), np.int64, len(args))
        except (TypeError, ValueError, OverflowError):
            values = list(map(get, args))
        try:
            arr = np.array(values, dtype=np.float64)  # None -> nan; exact below 2**53
        except (TypeError, ValueError):  # strings among the ids
            arr = np.array([_as_float(v) for v in values], dtype=np.float64)
        bad = ~np.isfinite(arr) | (np.abs(arr) >= 2**53)
        self.wide_ints += int(np.count_nonzero(bad & ~np.isnan(arr)))
        arr[bad] = -1
        return arr.astype(np.int64)

    def _times(self, events: list, col: str) -> np.ndarray:
        """µs floats -> float64; a null or text value (rare) becomes nan, later 0."""
        try:
            return np.fromiter(map(_GET[col], events), np.float64, len(events))
        except (TypeError, ValueError):
            return np.array([_as_float(v) for v in map(_GET[col], events)], dtype=np.float64)

    def add(self, events: list, exact: bool) -> list[tuple[int, str]]:
        """Append one slice of decoded events (``exact``: their ``ts`` is JSON text).

        Returns the events left out, as (position in ``events``, why): a ``ts`` that is null,
        not a number or out of range, a ``dur`` that is not a number or out of range.
        """
        if exact:
            ts = _exact_ns_many(list(map(_GET["ts"], events)))
            bad_ts = ts == BAD_NS
        else:
            us = self._times(events, "ts")
            bad_ts = ~(np.abs(us) < MAX_US)  # nan (null, text) and inf too
            ts = _us_to_ns(np.where(bad_ts, 0.0, us) if bad_ts.any() else us)
        d = self._times(events, "dur")
        bad_dur = ~(np.abs(d) < MAX_US)
        if bad_dur.any():  # a null dur is missing (0); text that is not a number is not
            bad_dur &= np.array([e.dur is not None for e in events], dtype=bool)
            d[~(np.abs(d) < MAX_US)] = 0.0
        bad = bad_ts | bad_dur
        if not bad.any():
            self._append(events, ts, d)
            return []
        keep = ~bad
        self._append(list(compress(events, keep.tolist())), ts[keep], d[keep])
        return [(int(i), _why(events[i], bool(bad_ts[i]))) for i in np.flatnonzero(bad)]

    def _append(self, events: list, ts: np.ndarray, d: np.ndarray) -> None:
        """Append the columns of events whose times are read (``d``: dur in µs)."""
        n = len(events)
        # one code per (ph, cat, name, pid, tid): one dict lookup per event instead of five;
        # the columns are split out of the (few) distinct keys when the file is done
        self.parts["key"].append(
            np.fromiter(map(self.keys.__getitem__, map(_KEY, events)), np.int32, n)
        )
        self.parts["ts_ns"].append(ts)
        self.parts["dur_ns"].append(np.rint(d * 1000).astype(np.int64))
        args = list(map(_ARGS, events))
        for col, key in _ID_ARGS.items():
            self.parts[col].append(self._ids(args, key))
        streams = self._ids(args, "stream")
        if (streams < 0).any():  # SYCL queues stand where CUDA streams are absent
            queues = self._ids(args, "sycl_queue")
            streams = np.where(streams >= 0, streams, queues)
        self.parts["stream"].append(streams)

    def finish(self) -> tuple[dict[str, np.ndarray], dict[str, list]]:
        """The joined columns, and each categorical column's values indexed by code."""
        cols = {}
        for col, parts in self.parts.items():
            cols[col] = np.concatenate(parts) if parts else np.array([], dtype=np.int64)
            parts.clear()  # free each piece as soon as it is joined
        keys = list(self.keys)  # in first-seen order, so each column's codes are too
        key = cols.pop("key").astype(np.intp)
        vocab = {}
        for i, col in enumerate(("ph",) + self.CATEGORICAL):
            codes = _Codes()
            table = np.fromiter(
                map(codes.__getitem__, map(itemgetter(i), keys)), np.int32, len(keys)
            )
            if col == "ph":
                instant = np.array([_IS_INSTANT[ph] for ph in codes], dtype=bool)
                cols["instant"] = instant[table][key] if keys else np.array([], dtype=bool)
            else:
                cols[col] = table[key] if keys else np.array([], dtype=np.int32)
                vocab[col] = list(codes)
        return cols, vocab


class Skipped:
    """Events left out of the table: all counted, the first few kept with index and reason.

    >>> s = Skipped(); s.add(3, "ts is null"); s.note()
    'skipped 1 bad events (index in traceEvents: why): #3: ts is null'
    """

    SHOWN = 5

    def __init__(self) -> None:
        self.count = 0
        self.first: list[tuple[int, str]] = []

    def add(self, index: int, why: str) -> None:
        self.count += 1
        if len(self.first) < self.SHOWN:
            self.first.append((index, why))

    def note(self) -> str:
        shown = "; ".join(f"#{i}: {why}" for i, why in self.first)
        more = self.count - len(self.first)
        tail = f"; and {more} more" if more else ""
        return f"skipped {self.count} bad events (index in traceEvents: why): {shown}{tail}"


def _why(event: Any, bad_ts: bool) -> str:
    """Why an event was left out, in words: the field and the value it held."""
    field = "ts" if bad_ts else "dur"
    value = getattr(event, field)
    if isinstance(value, msgspec.Raw):
        value = json.loads(bytes(value))  # Python's json: 1e400 reads as inf
    if value is None:
        return f"{field} is null"
    if isinstance(value, int | float) and value == value:  # 1e400 reads as inf
        return f"{field} is a number out of range ({value!r} µs)"
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    return f"{field} is {shown}, not a number"


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _us_to_ns(ts: np.ndarray) -> np.ndarray:
    """Finite µs (float64) -> integer ns without the loss of ``ts * 1000`` on epoch-sized
    values (the caller has replaced nan and inf)."""
    whole = np.floor(ts)
    return whole.astype(np.int64) * 1000 + np.rint((ts - whole) * 1000).astype(np.int64)


def _decode_any(text: bytes) -> Any:
    """Untyped decode; numbers beyond a float (``1e400``) go through Python's json, which
    reads them as inf instead of refusing the whole slice."""
    try:
        return ANY.decode(text)
    except msgspec.ValidationError:
        try:
            return json.loads(text.decode("utf-8", "replace"), strict=False)
        except json.JSONDecodeError as exc:  # the callers' signal for "not cut at an event"
            raise msgspec.DecodeError(str(exc)) from exc


def _ts_text(ts: Any) -> msgspec.Raw:
    if isinstance(ts, float) and not math.isfinite(ts):
        return msgspec.Raw(b"null" if math.isnan(ts) else b"1e400")  # read as bad
    return msgspec.Raw(msgspec.json.encode(ts))


def decode_loose(text: bytes, exact: bool) -> list:
    """Events whose fields have unexpected types: decode untyped, coerce field by field. An
    array item that is not an object becomes an event of phase ``NOT_AN_OBJECT`` whose name
    says what it was."""
    return loose_events(_decode_any(text), exact)


def loose_events(items: list, exact: bool) -> list:
    """:func:`decode_loose` of items already decoded."""
    cls = _ExactEvent if exact else _Event
    out = []
    for ev in items:
        if not isinstance(ev, dict):
            shown = repr(ev) if len(repr(ev)) <= 40 else repr(ev)[:37] + "..."
            out.append(cls(ph=NOT_AN_OBJECT, name=f"{shown} ({type(ev).__name__})"))
            continue
        a = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        ts = ev.get("ts", 0)
        out.append(
            cls(
                ph=str(ev.get("ph", "")),
                cat=_text(ev.get("cat")),
                name=_text(ev.get("name")),
                pid=ev.get("pid") if not isinstance(ev.get("pid"), dict | list) else None,
                tid=ev.get("tid") if not isinstance(ev.get("tid"), dict | list) else None,
                ts=_ts_text(ts) if exact else _number(ts),
                dur=_number(ev.get("dur")),
                args=_Args(
                    **{k: _scalar(a.get(v, -1)) for k, v in _ARG_KEYS.items()}, **_raw_args(a)
                ),  # fmt: skip
            )
        )
    return out


def _raw_args(args: dict) -> dict[str, msgspec.Raw]:
    """The argument keys present (ARG_KEYS) and the values the rules read, as ``_Args``
    fields."""
    out = {f: _PRESENT for k, f in _ARG_KEY_FIELDS.items() if k in args}
    out.update({f: msgspec.Raw(msgspec.json.encode(args[k])) for k, f in _RULE_FIELDS.items()
                if k in args})  # fmt: skip
    return out


_ARG_KEYS = {
    "correlation": "correlation",
    "external_id": "External id",
    "device": "device",
    "stream": "stream",
    "sycl_queue": "sycl queue",
    "name": "name",
}


def _number(value: Any) -> Any:
    """A time as decoded (text stays text, so a bad one can be shown as written)."""
    return value if value is None or isinstance(value, int | float | str) else str(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _scalar(value: Any) -> Scalar:
    return value if isinstance(value, int | float | str) else None
