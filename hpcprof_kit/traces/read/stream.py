"""Stream a chrome-trace JSON file (Kineto or unitrace) into NumPy columns, slice by slice.

The file is never held as Python objects: it is read in pieces of 4 MiB, and decoded in
slices of about 256 KiB, each cut at the end of a complete event and decoded with the typed
decoders of ``events.py``; the columns grow by one NumPy array per slice. Defects seen in the
wild (raw control characters, bare ``N/A``, trailing ``{}``, wide integers, a file cut short)
are repaired or skipped with a warning instead of a crash; an event whose time cannot be read
(``"ts": "abc"``, ``1e400``) or that is not an object is left out, and the warning names its
index in ``traceEvents`` and why.

>>> from hpcprof_kit.traces.read.stream import read_chrome   # doctest: +SKIP
>>> trace = read_chrome("traces/train-0-of-2.json.gz")  # doctest: +SKIP
>>> trace.columns["ts_ns"][:3]                           # doctest: +SKIP
"""

from __future__ import annotations

import gc
import json
import os
import re
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces.read.events import (
    _ARG_KEY_FIELDS,
    ANY,
    ARG_KEYS,
    EXACT,
    FAST,
    KEPT_PHASES,
    NOT_AN_OBJECT,
    Columns,
    Skipped,
    decode_loose,
    loose_events,
)
from hpcprof_kit.traces.read.text import _MEMORY_NAME, _clean, _pieces

try:  # the compiled scanner (setup.py): the plain slices in C; without it, all through msgspec
    from hpcprof_kit.traces.read import _scan
except ImportError:  # pragma: no cover - an install without a C compiler
    _scan = None

# Decode this much at a time: the events of one slice stay in the CPU cache while their
# columns are gathered, which is faster than larger slices (measured in bench_loader.py).
SLICE_BYTES = 256 * 1024
HEADER_LIMIT = 64 * 1024 * 1024  # traceEvents must start within this many bytes
_PH = attrgetter("ph")
_TS = attrgetter("ts")
_ARGS = attrgetter("args")

# µs whose ns decimals float64 cannot hold: from 2**43 µs (about 8.8e12) a float64 step
# exceeds 1 ns, so 14+ integer digits, or 13 from 8e12 on (absolute epoch µs has 16).
_NEEDS_EXACT = re.compile(rb'"ts"\s*:\s*-?(?:\d{14,}|[89]\d{12})\.\d*[1-9]')
FLOAT_EXACT_US = 8e12  # below this, float64 µs rounds to the exact ns


def _beyond_float(events: list) -> bool:
    """Whether any time of a slice reaches ``FLOAT_EXACT_US`` (one C-level pass)."""
    try:
        us = np.fromiter(map(_TS, events), np.float64, len(events))
    except (TypeError, ValueError):  # a null or text time (the loose path)
        us = np.array([e.ts if isinstance(e.ts, float) else 0.0 for e in events])
    return bool((np.abs(us) >= FLOAT_EXACT_US).any())


_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_AFTER_EVENT = re.compile(rb"\s*(?:,\s*\{|\])")
_AFTER_LAST = re.compile(rb"\s*,?\s*$")
_LEAD = re.compile(rb"[\s,\[]*")


@dataclass
class ChromeTrace:
    """What one chrome-trace file holds, as columns plus its top-level metadata."""

    path: Path
    header: dict[str, Any]
    columns: dict[str, np.ndarray]
    vocab: dict[str, list]  # categorical column -> its values, indexed by code
    process_names: dict[str, str] = field(default_factory=dict)
    thread_names: dict[tuple[str, str], str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    text_bytes: int = 0  # decompressed JSON size
    skipped: Skipped = field(default_factory=Skipped)  # events left out, and why
    # the ARG_KEYS that kept events' args hold; None: not known (a scanner built before)
    arg_keys: tuple[str, ...] | None = ()
    # the arguments the rules read (kept_args.COLUMNS); None: not kept (a scanner built before)
    args: dict[str, np.ndarray] | None = None


def _decode_object(text: bytes) -> dict[str, Any] | None:
    for candidate in (text, _clean(text)):
        try:
            value = ANY.decode(candidate)
        except msgspec.DecodeError:
            continue
        return value if isinstance(value, dict) else None
    return None


def _header(text: bytes) -> dict[str, Any]:
    """Top-level keys before ``traceEvents``: ``{"schemaVersion": 1, ... ,`` -> a dict."""
    body = text.strip().rstrip(b",")
    return _decode_object(body + b"}") or {}


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.notes: list[str] = []
        self.cols = Columns()
        self.dirty = False  # the file needed repairs once: repair every later slice up front
        self.exact = False
        self.meta: list = []  # M events
        self.empty_events = 0
        self.done = False  # saw the closing ']' of traceEvents
        self.seen = 0  # items of traceEvents decoded so far (the index of the next one)
        self.skipped = Skipped()
        self.invalid = ""  # why the rest of traceEvents is not valid JSON, if it is not
        self.scanner = _scan if os.environ.get("HPCPROF_SCANNER", "on") != "off" else None
        self.scanned = self.decoded = 0  # slices read by the compiled scanner / by msgspec
        self.arg_keys: set[str] | None = set()  # of ARG_KEYS, in kept events' args
        from hpcprof_kit.traces.read.kept_args import (  # (it reads files with this module)
            ANCHOR_BITS,
            Collector,
        )

        self.args = Collector()  # the arguments the rules read, kept as the file is read
        # the scanner reads them too (one compiled before does not: none are kept then)
        reads = hasattr(self.scanner, "RULE_ARGS") and ANCHOR_BITS is not None
        self.rule_args = (self.args.texts, ANCHOR_BITS) if reads else None
        # the [memory] events' args, per slice: the scanner's rows (with the odd ones decoded
        # here, by row) or raw columns (memory_events.py); None: not all kept (a slice read
        # by a scanner that does not read them, or salvaged)
        self.memory: list[tuple[tuple[bytes, ...], dict] | dict] | None = []
        if reads and hasattr(self.scanner, "MEMORY_ARGS"):
            self.rule_args = (*self.rule_args, True)

    def _scan_slice(self, buf: bytearray, start: int, stop: int) -> bool:
        """Read ``buf[start:stop]`` with the compiled scanner; False: it left the slice to
        msgspec (anything outside the plain case, see ``_scan.c``), nothing was added."""
        if self.scanner is None or self.dirty:
            return False
        rule_args = self.rule_args or ()
        got = self.scanner.scan(buf, start, stop, self.cols.raw_keys, self.cols.new_key, *rule_args)
        if got is None:
            return False
        items, arrays, meta, exact_needed, *keys = got
        if not keys:  # a scanner compiled before it noted the argument keys
            self.arg_keys = None
        elif keys[0] and self.arg_keys is not None:
            self.arg_keys.update(k for i, k in enumerate(ARG_KEYS) if keys[0] >> i & 1)
        if not rule_args:  # a scanner compiled before it read the rules' arguments
            self.args.lost = True
        else:
            self.args.add_scanned(*keys[1], buf)
        if len(keys) < 3 or len(rule_args) < 3:  # nor the [memory] events' args
            self.memory = None
        elif keys[2][0][0] and self.memory is not None:
            self._scanned_memory(*keys[2], buf)
        self.exact = self.exact or exact_needed
        self.seen += items
        self.scanned += 1
        if meta:
            text = b"[" + b",".join(bytes(buf[s:e]) for s, e in meta) + b"]"
            self.meta.extend(self._decode_with(EXACT if self.exact else FAST, text) or ())
        self.cols.add_scanned(arrays)
        return True

    def _decode(self, text: bytes) -> list | None:
        """Decode ``[events]``; ``ts`` as float64 unless the file needs it exact (see below).

        ``text`` is always an immutable ``bytes`` copy: a ``msgspec.Raw`` value (exact ``ts``)
        keeps a buffer export of its input, so decoding a view of the growing read buffer
        would pin that buffer (``BufferError: memoryview has N exported buffers``).
        """
        events = self._decode_with(EXACT if self.exact else FAST, text)
        # the costly regex runs only on slices whose times are large enough to need it
        if events and not self.exact and _beyond_float(events) and _NEEDS_EXACT.search(text):
            self.exact = True  # from here on every slice keeps ts as its text
            events = self._decode_with(EXACT, text)
        return events

    def _decode_with(self, decoder: msgspec.json.Decoder, text: bytes) -> list | None:
        """Decode with ``decoder``, repairing invalid JSON once it has been seen."""
        for repair in (False, True) if not self.dirty else (True,):
            candidate = _clean(text) if repair else text
            try:
                try:
                    events = decoder.decode(candidate)
                except msgspec.ValidationError:  # a field of another type: decode untyped
                    events = decode_loose(candidate, self.exact)
            except (msgspec.DecodeError, UnicodeDecodeError):  # invalid JSON or UTF-8, or
                continue  # not cut at an event's end
            if repair and not self.dirty:
                self.dirty = True
                self.notes.append(
                    "repaired invalid JSON (control characters, bare N/A/NaN or bytes that are"
                    " not UTF-8)"
                )
            return events
        return None

    def _decode_slice(self, buf: bytearray, start: int, stop: int) -> list | None:
        """Decode the events in ``buf[start:stop]`` from a bracketed ``bytes`` copy of them."""
        with memoryview(buf) as whole, whole[start:stop] as body:
            text = b"".join((b"[", body, b"]"))  # one copy; the views are released here
        return self._decode(text)

    def consume(self, buf: bytearray, pos: int, final: bool) -> int:
        """Decode about ``SLICE_BYTES`` of complete events from ``buf[pos:]``; return the new pos.

        ``pos`` is at the ``[`` or ``,`` before the next event. Returns ``pos`` unchanged when
        no complete event is there yet (more bytes are needed, or the file ends).
        """
        start = _LEAD.match(buf, pos).end()
        window = SLICE_BYTES
        while True:
            end = min(start + window, len(buf))
            at_end = end == len(buf)
            used = self._consume_window(buf, start, end, final and at_end)
            if used is not None:
                return used
            if at_end:
                break
            window *= 4  # an event longer than the window: look further
        if not final and end - start > HEADER_LIMIT:
            raise TraceFormatError(
                f"{self.path}: no complete trace event could be decoded near byte offset "
                f"{start}; expected a JSON array of chrome-trace events in 'traceEvents'"
            )
        return pos

    def _consume_window(self, buf: bytearray, start: int, end: int, final: bool) -> int | None:
        """Decode up to the last event that ends before ``end``; None when there is none.

        At the end of the file the buffer's last brace may end the last event of an array
        cut short; in a complete file it closes the top-level object. It is tried only when
        no event end before it (a brace followed by ``,{`` or ``]``) can be read: in a
        complete file one of those ends the array, and the trailer after the array is never
        read as events (which cost a failed scan and two failed decodes of a whole window).
        """
        attempts = 0
        deferred = None  # the buffer's last brace, at the end of the file
        while attempts < 8:
            p = buf.rfind(b"}", start, end)
            if p < 0:
                break
            end = p
            after = _AFTER_EVENT.match(buf, p + 1)
            if not after:
                if final and deferred is None and _AFTER_LAST.match(buf, p + 1):
                    deferred = p
                continue  # a brace inside an event, or the buffer's last one
            attempts += 1
            if not self._read_slice(buf, start, p + 1):
                continue
            if buf[after.end() - 1] == 0x5D:  # "]": the array is complete
                self.done = True
                return after.end()
            return p + 1
        if deferred is not None and self._read_slice(buf, start, deferred + 1):
            return _AFTER_LAST.match(buf, deferred + 1).end()
        return None

    def _read_slice(self, buf: bytearray, start: int, stop: int) -> bool:
        """Read the events in ``buf[start:stop]``, in C or else by msgspec; False: they are
        not whole events (nothing was added)."""
        if self._scan_slice(buf, start, stop):
            return True
        events = self._decode_slice(buf, start, stop)
        if events is None:
            return False
        self.decoded += 1
        self._keep(events)
        if self.memory is not None and buf.find(_MEMORY_NAME, start, stop) >= 0:
            from hpcprof_kit.traces.read.memory_events import (  # (it reads files with this module)
                decoded,
                objects_in,
            )

            self.memory.append(decoded(objects_in(bytes(buf[start:stop]))))
        return True

    def _scanned_memory(self, arrays: tuple[bytes, ...], odd: list, buf: Any) -> None:
        """The scanner's [memory] rows of one slice; ``odd`` (row, start, stop): events
        holding a value it leaves to Python (a float, text, a repeated key), decoded here."""
        from hpcprof_kit.traces.read.memory_events import (
            decoded,  # (it reads files with this module)
        )

        self.memory.append((arrays, {row: decoded([bytes(buf[s:e])]) for row, s, e in odd}))

    def salvage(self, buf: bytearray, pos: int) -> bytes | None:
        """Last resort at the end of the file: the rest of traceEvents read by Python's json
        (items that are not objects, say). Returns what follows the array, or None."""
        text = _clean(b"[" + bytes(buf[_LEAD.match(buf, pos).end() :])).decode("utf-8", "replace")
        try:
            items, end = json.JSONDecoder(strict=False).raw_decode(text)
        except json.JSONDecodeError as exc:
            # a string open to the end, or an error at the end: the file is cut, not invalid
            cut = exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string")
            if not cut:
                self.invalid = f"{exc.msg} at byte {exc.pos - 1} after the last event read"
            return None
        self._keep(loose_events(items, self.exact))
        if _MEMORY_NAME in text.encode():  # not as the file has it: read again when asked
            self.memory = None
        self.done = True
        return text[end:].encode()

    def _keep(self, events: list) -> None:
        base = self.seen
        self.seen += len(events)
        phases = list(map(_PH, events))
        seen = set(phases)
        if seen <= KEPT_PHASES:
            kept = events
        else:  # one C-level pass per rare phase, not one Python test per event
            kept = list(compress(events, map(KEPT_PHASES.__contains__, phases)))
            if "M" in seen:
                self.meta.extend(compress(events, map("M".__eq__, phases)))
            if "" in seen:
                blank = compress(events, map("".__eq__, phases))
                self.empty_events += sum(1 for e in blank if e.name is None)
            if NOT_AN_OBJECT in seen:
                for i in compress(range(len(events)), map(NOT_AN_OBJECT.__eq__, phases)):
                    self.skipped.add(base + i, f"{events[i].name} is not a JSON object")
        if not kept:
            return
        self._note_arg_keys(kept)
        self.args.add_decoded(kept)
        skipped = self.cols.add(kept, self.exact)
        if skipped:  # positions in kept -> in events
            where = list(compress(range(len(events)), map(KEPT_PHASES.__contains__, phases)))
            for i, why in skipped:
                self.skipped.add(base + where[i], why)

    def _note_arg_keys(self, kept: list) -> None:
        """Note which of ``ARG_KEYS`` the events' args hold (a C-level pass per key not yet
        seen; an absent key decodes as an empty ``Raw``)."""
        if self.arg_keys is None or len(self.arg_keys) == len(ARG_KEYS):
            return
        args = list(map(_ARGS, kept))
        for key in ARG_KEYS:
            if key not in self.arg_keys and any(map(attrgetter(_ARG_KEY_FIELDS[key]), args)):
                self.arg_keys.add(key)


def read_chrome(path: str | Path) -> ChromeTrace:
    """Read one chrome-trace file (``.json`` or ``.json.gz``) into columns.

    >>> import json, tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.json"
    >>> _ = p.write_text(json.dumps({"traceEvents": [
    ...     {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
    ...      "ts": 1712195495519695.8, "dur": 2.5}]}))
    >>> t = read_chrome(p)
    >>> int(t.columns["ts_ns"][0]), int(t.columns["dur_ns"][0])
    (1712195495519695800, 2500)
    """
    path = Path(path)
    reader = _Reader(path)
    buf = bytearray()
    pos = 0  # bytes of buf already decoded; dropped before the next piece is appended
    header: dict[str, Any] | None = None
    total = 0
    gc_was_on = gc.isenabled()
    gc.disable()  # the collector would rescan every decoded event; nothing here is cyclic
    try:
        for piece in _pieces(path, reader.notes):
            total += len(piece)
            del buf[:pos]
            pos = 0
            buf += piece
            if reader.done:
                continue  # only the trailing keys remain; keep them for the metadata
            if header is None:
                header = _find_events(buf, path, final=False)
                if header is None:
                    continue
            while len(buf) - pos >= 2 * SLICE_BYTES and not reader.done:
                used = reader.consume(buf, pos, final=False)
                if used == pos:
                    break
                pos = used
        del buf[:pos]
        if header is None:
            header = _find_events(buf, path, final=True) or {}
        pos = 0
        while not reader.done and _LEAD.match(buf, pos).end() < len(buf):
            used = reader.consume(buf, pos, final=True)
            if used == pos:
                break
            pos = used
        trailer = None if reader.done else reader.salvage(buf, pos)
        trailer = bytes(buf[pos:]) if trailer is None else trailer
    finally:
        if gc_was_on:
            gc.enable()
    return _finish(reader, header, trailer, total)


def _find_events(buf: bytearray, path: Path, final: bool) -> dict[str, Any] | None:
    """Locate the start of the traceEvents array; drop the header from ``buf`` and return it."""
    head = bytes(buf[:64]).lstrip()
    if head[:1] == b"[":  # the bare-array form of the chrome trace format
        del buf[: len(buf) - len(buf.lstrip())]  # keep the "[" (see consume)
        return {}
    if head[:1] not in (b"{", b""):
        raise TraceFormatError(
            f"{path}: not a trace file: expected a chrome-trace JSON object with a "
            f"'traceEvents' array (Kineto or unitrace), found {head[:40]!r}"
        )
    match = _EVENTS_KEY.search(buf)
    if match is None:
        if final or len(buf) > HEADER_LIMIT:
            raise TraceFormatError(
                f"{path}: not a trace file: no 'traceEvents' array in its first "
                f"{min(len(buf), HEADER_LIMIT)} bytes; expected Kineto or unitrace chrome JSON"
            )
        return None
    header = _header(bytes(buf[: match.start()]))
    del buf[: match.end() - 1]  # keep the "[" (see consume)
    return header


def _finish(reader: _Reader, header: dict, trailer: bytes, total: int) -> ChromeTrace:
    notes = reader.notes
    text = trailer.strip()
    lost = len(text.lstrip(b", \n\r\t"))
    if not reader.done and reader.invalid:  # not "cut short": the file goes on after it
        notes.append(
            f"event #{reader.seen} or one soon after it is not valid JSON ({reader.invalid});"
            f" kept every event before it, the {lost} bytes from there on were not read"
        )
    elif not reader.done:
        notes.append(
            f"file cut short: kept every complete event, {lost} bytes after the last one were lost"
        )
    elif text.strip(b",}\n\r\t ").strip():
        extra = _decode_object(b"{" + text.lstrip(b", \n\r\t"))
        if extra is None:
            notes.append("the keys after traceEvents could not be read (file cut short?)")
        else:
            header = {**header, **extra}
    if reader.empty_events:
        notes.append(f"skipped {reader.empty_events} empty {{}} events")
    if reader.skipped.count:
        notes.append(reader.skipped.note())
    if reader.cols.wide_ints:
        notes.append(f"{reader.cols.wide_ints} ids did not fit in int64 and were set to -1")
    columns, vocab = reader.cols.finish()
    base = header.get("baseTimeNanoseconds")
    relative = columns["ts_ns"].size and int(columns["ts_ns"].max()) < (base or 0)
    if isinstance(base, int) and relative:
        # torch >= 2.4: ts is relative to the base; older traces are absolute already
        columns["ts_ns"] += base
    processes, threads = {}, {}
    for m in reader.meta:
        value = m.args.name if isinstance(m.args.name, str) else None
        if value is not None and m.name == "process_name":
            processes[str(m.pid)] = value
        elif value is not None and m.name == "thread_name":
            threads[(str(m.pid), str(m.tid))] = value
    keys = None if reader.arg_keys is None else tuple(k for k in ARG_KEYS if k in reader.arg_keys)
    args = reader.args.finish()
    if args is not None and reader.memory is not None:  # kept beside the rules' arguments
        from hpcprof_kit.traces.read.memory_events import kept  # (it reads files with this module)

        args.update(kept(reader.memory, list(reader.cols.keys), base))
    return ChromeTrace(
        reader.path,
        header,
        columns,
        vocab,
        processes,
        threads,
        notes,
        total,
        reader.skipped,
        keys,
        args,
    )
