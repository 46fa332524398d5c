"""A trace file's text: its bytes, inflated piece by piece when gzipped, and the repairs that
make a profiler's invalid JSON decodable. Every reader of a file starts here: the loader's pass,
the ``[memory]`` events and the rules' arguments read again."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

READ_BYTES = 4 * 1024 * 1024  # read (or inflate) this much at a time
_MEMORY_NAME = b'"[memory]"'  # memory_events.MEMORY_EVENT as JSON (it searches for it too)
_BARE_WORDS = re.compile(rb"(:\s*|\[\s*|,\s*)(?:N/A|NaN|-?Infinity|nan|inf)(?=\s*[,}\]])")
_CONTROL = bytes.maketrans(bytes(range(32)), b" " * 32)


def _pieces(path: Path, warn: list[str]):
    """Yield the decompressed bytes of ``path``; a gzip cut short ends early with a note."""
    with open(path, "rb") as fh:
        first = fh.read(2)
        fh.seek(0)
        if first != b"\x1f\x8b":
            while piece := fh.read(READ_BYTES):
                yield piece
            return
        inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
        while raw := fh.read(READ_BYTES // 4):
            while raw:
                try:
                    yield inflater.decompress(raw, READ_BYTES)
                except zlib.error as exc:
                    warn.append(f"gzip stream is damaged ({exc}); kept what came before")
                    return
                raw = inflater.unconsumed_tail
                if inflater.eof and inflater.unused_data:  # concatenated gzip members
                    raw = inflater.unused_data
                    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
        yield inflater.flush()
        if not inflater.eof:
            warn.append("gzip stream ends before its end marker (file cut short)")


def _clean(text: bytes) -> bytes:
    """Repair the invalid JSON that profilers write: control characters, bare N/A and NaN, and
    bytes that are not UTF-8 (each becomes U+FFFD)."""
    try:
        text.decode()
    except UnicodeDecodeError:
        text = text.decode("utf-8", "replace").encode()
    return _BARE_WORDS.sub(rb"\1null", text.translate(_CONTROL))
