"""The few event arguments the rules read, kept by the loader in the same pass that reads a
file: copy bytes, collective name, message bytes and group size, and the input types of ops,
with the ids the rules join them on (correlation, External id). The compiled scanner reads
their values as it walks each event's args (texts as codes; an odd value, such as a size
written as text, it leaves to Python with the event's place), and slices read by msgspec hand
over their decoded args: so the report reads no trace file a second time. A file the loader
kept none of (a cache copy of old) is searched for them with :func:`columns_of`.

Each column is one value per event that has a byte count, a collective's name or input
types, in file order (``COLUMNS``; -1 and "" where the event has none):

>>> cols = columns_of([b'{"ph": "X", "name": "Memcpy HtoD (Pageable -> Device)", "ts": 1,'
...                    b' "args": {"bytes": 64, "correlation": 5}}',
...                    b'{"ph": "X", "name": "nccl:all_reduce", "ts": 2, "args": {'
...                    b'"Collective name": "allreduce", "In msg nelems": 256,'
...                    b' "dtype": "BFloat16", "Group size": 8, "correlation": 6}}'])
>>> cols["bytes"].tolist(), cols["coll"].tolist(), cols["group"].tolist()
([64, 512], ['', 'allreduce'], [-1, 8])
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from hpcprof_kit.traces.read.event_args_files import DTYPE_BYTES, KINDS, _number
from hpcprof_kit.traces.read.events import _RULE_FIELDS, ARG_KEYS, _decode_any
from hpcprof_kit.traces.read.text import _clean

RULE_KINDS = ("copies", "collectives", "inputs")  # the kinds of argument the rules read
COLUMNS = ("corr", "ext", "bytes", "coll", "group", "input_type")
# the keys that mark an event the rules look at, in its args
ANCHORS = frozenset(k.decode() for kind in RULE_KINDS for k in KINDS[kind])
# those keys as the scanner's bits (events.ARG_KEYS); None when it does not note each of them:
# then it cannot find the events, and the files are searched instead
ANCHOR_BITS = (sum(1 << i for i, k in enumerate(ARG_KEYS) if k in ANCHORS)
               if set(ARG_KEYS) >= ANCHORS else None)  # fmt: skip
_KEPT = ("X", "i", "I")
_ARGS = attrgetter("args")
_ANCHOR_FIELDS = ("bytes", "size", "collective", "input_dims")  # those keys' events._Args fields
_ANCHORED = attrgetter(*_ANCHOR_FIELDS)


def _joined(types: Any) -> str:
    """``["float", "float"]`` -> ``"float,float"`` ("" when not a list)."""
    return ",".join(str(t) for t in types) if isinstance(types, list) else ""


def _row(get: Any, typed: bool) -> tuple | None:
    """One event's values in ``COLUMNS`` order, from ``get(key)`` (an args key's decoded
    value; None when absent): None when it has no byte count, collective name or input types
    (``typed``: the key is there, whatever its value). A value of another type than the rule
    reads (a name that is a number, a size that is true) counts as absent."""
    b, coll = _number(get("bytes")), get("Collective name")
    coll = coll if isinstance(coll, str) else None
    if b is None and coll is None and not typed:
        return None
    elems, dtype = _number(get("In msg nelems")), get("dtype")
    if b is None and elems is not None:  # a collective: its elements times their size
        b = elems * DTYPE_BYTES.get(str(dtype if isinstance(dtype, str) else None), 4)
    types = _joined(get("Input type"))
    return (_number(get("correlation")), _number(get("External id")), b, coll or "",
            _number(get("Group size")), types)  # fmt: skip


def _event_row(text: bytes) -> tuple | None:
    """:func:`_row` of one event's JSON text (repaired as the loader repairs it); None when
    it is no kept event holding one of the keys the rules look for in its args."""
    for candidate in (text, _clean(text)):
        try:
            event = _decode_any(candidate)
            break
        except msgspec.DecodeError:
            continue
    else:
        return None
    args = event.get("args") if isinstance(event, dict) else None
    if not isinstance(args, dict) or event.get("ph") not in _KEPT or not ANCHORS & args.keys():
        return None
    return _row(args.get, "Input type" in args)


def _as_rows(values: list[tuple]) -> dict[str, list]:
    columns = zip(*values, strict=True) if values else ([] for _ in COLUMNS)
    return {c: list(v) for c, v in zip(COLUMNS, columns, strict=True)}


def _ids(values: list) -> np.ndarray:
    """Whole numbers as int64; None, and any beyond int64, as -1."""
    try:
        return np.array([-1 if v is None else v for v in values], dtype=np.int64)
    except OverflowError:
        big = 1 << 63
        return np.array([-1 if v is None or not -big <= v < big else v for v in values],
                        dtype=np.int64)  # fmt: skip


def _arrays(rows: dict[str, list]) -> dict[str, np.ndarray]:
    return {c: np.array(v, dtype=object) if c in ("coll", "input_type") else _ids(v)
            for c, v in rows.items()}  # fmt: skip


def columns_of(objects: list[bytes]) -> dict[str, np.ndarray]:
    """The kept columns (``COLUMNS``) of the events among ``objects`` (JSON texts found in a
    file by the keys), in their order: the same values the loader keeps."""
    return _arrays(_as_rows([row for row in map(_event_row, objects) if row is not None]))


_TEXT = ("coll", "input_type")


def pack(cols: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The columns as one int64 array, a row each in ``COLUMNS`` order (text as codes over
    labels), and the labels: two arrays to store instead of six.

    >>> cols = columns_of([b'{"ph": "X", "args": {"bytes": 8, "Input type": ["float"]}}'])
    >>> ints, labels = pack(cols)
    >>> ints.tolist(), labels.tolist()
    ([[-1], [-1], [8], [0], [-1], [1]], ['', 'float'])
    >>> {c: v.tolist() for c, v in unpack(ints, labels).items()} == {
    ...     c: v.tolist() for c, v in cols.items()}
    True
    """
    index: dict[str, int] = {}
    rows = [[index.setdefault(v, len(index)) for v in cols[c]] if c in _TEXT else cols[c]
            for c in COLUMNS]  # fmt: skip
    return np.array(rows, dtype=np.int64).reshape(len(COLUMNS), -1), np.array(list(index), str)


def unpack(ints: np.ndarray | None = None, labels: np.ndarray | None = None) -> dict:
    """:func:`pack` undone; no arrays: no rows."""
    if ints is None or labels is None:
        return _arrays({c: [] for c in COLUMNS})
    text = labels.astype(object)
    return {c: text[row] if c in _TEXT else row for c, row in zip(COLUMNS, ints, strict=True)}


# the scanner's columns of the same events (``_scan.c``): ids and sizes, texts as codes
SCANNED = ("corr", "ext", "bytes", "elems", "group", "coll", "dtype", "input_type")


def _value(raw: Any) -> Any:
    """A value from its JSON text (None when empty or not JSON)."""
    try:
        return msgspec.json.decode(raw) if raw else None
    except msgspec.DecodeError:
        return None


def _name(raw: bytes) -> str:
    """A JSON string's text; "" for any other value."""
    value = _value(raw)
    return value if isinstance(value, str) else ""


class Collector:
    """Gathers one file's kept columns, slice by slice, as the loader reads it: the rows the
    scanner read (``SCANNED``, each text a code in ``texts``: its raw JSON -> code), and the
    events of slices read another way, decoded here and coded alike."""

    def __init__(self) -> None:
        self.texts: dict[bytes, int] = {}
        self.blocks: list[np.ndarray] = []  # (len(SCANNED), rows) each
        self.lost = False  # a slice was read by a scanner that does not read the arguments

    def add_scanned(self, arrays: tuple[bytes, ...], odd: list, buf: Any) -> None:
        """The scanner's rows of one slice; ``odd`` (row, start, stop): events holding a
        value it leaves to Python (a size as text, an escaped name), decoded here."""
        if not arrays[0]:  # no row: most slices of most files
            return
        block = np.vstack([np.frombuffer(a, dtype=np.int64) for a in arrays])
        if odd:
            keep = np.ones(block.shape[1], dtype=bool)
            for row, start, stop in odd:
                values = _event_row(bytes(buf[start:stop]))
                if values is None:  # not one the rules read, after all
                    keep[row] = False
                else:
                    block[:, row] = self._coded(_as_rows([values]))[:, 0]
            block = block[:, keep]
        if block.shape[1]:
            self.blocks.append(block)

    def add_decoded(self, events: list) -> None:
        """Events of a slice read another way (msgspec, or the last-resort salvage), with
        their args as the table decodes them (``events._Args``: each value the rules read
        as its JSON text)."""
        args = list(map(_ARGS, events))
        if not any(any(map(attrgetter(f), args)) for f in _ANCHOR_FIELDS):  # C-level passes
            return
        found = []
        for a in args:
            if not any(_ANCHORED(a)):  # no anchor key
                continue
            values = {key: _value(getattr(a, field)) for key, field in _RULE_FIELDS.items()}
            values.update({"correlation": a.correlation, "External id": a.external_id})
            row = _row(values.get, bool(a.input_types))
            if row is not None:
                found.append(row)
        if found:
            self.blocks.append(self._coded(_as_rows(found)))

    def _code(self, value: Any) -> int:
        raw = msgspec.json.encode(value)
        return self.texts.setdefault(raw, len(self.texts))

    def _coded(self, rows: dict[str, list]) -> np.ndarray:
        """Rows of final values (:func:`_row`) in the scanner's layout, sizes worked out."""
        none = [-1] * len(rows["corr"])
        coll = [self._code(v) if v else -1 for v in rows["coll"]]
        types = [self._code(v.split(",")) if v else -1 for v in rows["input_type"]]
        return np.vstack([_ids(rows["corr"]), _ids(rows["ext"]), _ids(rows["bytes"]), none,
                          _ids(rows["group"]), coll, none, types])  # fmt: skip

    def finish(self) -> dict[str, np.ndarray] | None:
        if self.lost:
            return None
        block = np.hstack(self.blocks) if self.blocks else np.zeros((len(SCANNED), 0), np.int64)
        corr, ext, nbytes, elems, group, coll, dtype, types = block
        raws = list(self.texts)  # in code order; code -1 (none) takes the last slot
        names = np.array([*map(_name, raws), ""], dtype=object)
        sizes = np.array([DTYPE_BYTES.get(n, 4) for n in names], dtype=np.int64)
        # a collective's bytes: its elements times their size, where no byte count is given
        nbytes = np.where((nbytes < 0) & (elems >= 0), elems * sizes[dtype], nbytes)
        return {"corr": corr, "ext": ext, "bytes": nbytes, "coll": names[coll], "group": group,
                "input_type": np.array([*(_joined(_value(r)) for r in raws), ""], dtype=object)[types]}  # fmt: skip


class KeptArgs(str):
    """The kept columns of each file a table was loaded from (``by_file``: source ->
    columns; a file missing from it was not kept), the ``[memory]`` events' beside the rules'
    under ``mem.`` names (:mod:`~.memory_events`).

    It lives in ``df.attrs``, which pandas deep-copies on most operations and writes as JSON
    into a parquet file's metadata. So it is one object shared by every copy (the columns
    never change), and it is a ``str``, its summary, which is what JSON keeps: a table read
    back from parquet has the text, and its arguments are searched for in its files again.

    >>> kept = KeptArgs({"t.json": columns_of([])})
    >>> import copy, json; copy.deepcopy(kept) is kept, json.dumps({"event_args": kept})
    (True, '{"event_args": "event arguments kept: 0 events from 1 files"}')
    """

    by_file: dict[str, dict[str, np.ndarray]]

    def __new__(cls, by_file: dict[str, dict[str, np.ndarray]]) -> KeptArgs:
        n = sum(len(c["corr"]) for c in by_file.values())
        self = super().__new__(cls, f"event arguments kept: {n} events from {len(by_file)} files")
        self.by_file = by_file
        return self

    def __reduce__(self) -> tuple:  # pickled with its columns, not as its text
        return KeptArgs, (self.by_file,)

    def __deepcopy__(self, memo: dict) -> KeptArgs:
        return self

    def __copy__(self) -> KeptArgs:
        return self

    def __eq__(self, other: object) -> bool:  # the same files and values (two loads, say)
        if not isinstance(other, KeptArgs):
            return NotImplemented
        mine, theirs = self.by_file, other.by_file
        return mine.keys() == theirs.keys() and all(
            c.keys() == theirs[f].keys() and all(np.array_equal(v, theirs[f][k]) for k, v in
            c.items()) for f, c in mine.items())  # fmt: skip

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__  # equal ones have the same text

    def get(self, source: str) -> dict[str, np.ndarray] | None:
        return self.by_file.get(source)


def kept_of(parts: list[Any]) -> KeptArgs | None:
    """The kept columns of one rank's parts (:class:`~.parts.Part`), by source file."""
    by_file = {str(p.meta.get("source")): p.args for p in parts if p.args is not None}
    return KeptArgs(by_file) if by_file else None


__all__ = ["COLUMNS", "RULE_KINDS", "Collector", "KeptArgs", "columns_of", "kept_of"]
