"""A columnar copy of each loaded trace, so the second load of a file is near instant.

The copy lives beside the traces in ``.hpcprof-cache/<file>.<key>.npz`` (one rank's
:class:`~hpcprof_kit.traces.read.parts.Part`: category codes, their labels, integer columns, and
the rank metadata as JSON). The
key changes whenever the file does (size, mtime in ns, a hash of its first and last MiB) or
the communication patterns do. A read-only trace folder (a shared data set) uses
``$XDG_CACHE_HOME/hpcprof_kit/traces`` instead; if neither is writable, nothing is cached
and nothing fails.

>>> key = cache_key("traces/train-0-of-2.json.gz", None)   # doctest: +SKIP
>>> read("traces/train-0-of-2.json.gz", key)                # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from hpcprof_kit.traces.read import parts
from hpcprof_kit.traces.read.parts import Part

CACHE_DIR = ".hpcprof-cache"
FORMAT_VERSION = "5"  # bump when the table or the parser changes meaning
_EDGE = 1024 * 1024


def cache_key(path: str | os.PathLike[str], comm_patterns: Any) -> str:
    """A short hex key that changes when the file's size, mtime or edges, or the patterns, change.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.json"; _ = p.write_text("{}")
    >>> cache_key(p, None) == cache_key(p, None) != cache_key(p, ["^x"])
    True
    """
    from hpcprof_kit.traces.read.patterns import COMM_PATTERNS

    p = Path(path)
    st = p.stat()
    h = hashlib.blake2b(digest_size=10)
    h.update(f"{FORMAT_VERSION}|{st.st_size}|{st.st_mtime_ns}|".encode())
    h.update(repr(COMM_PATTERNS if comm_patterns is None else list(comm_patterns)).encode())
    with open(p, "rb") as fh:
        h.update(fh.read(_EDGE))
        if st.st_size > _EDGE:
            fh.seek(max(_EDGE, st.st_size - _EDGE))
            h.update(fh.read(_EDGE))
    return h.hexdigest()


def _places(path: Path, key: str) -> list[Path]:
    """Where the copy may live: beside the trace, then the user's cache folder."""
    beside = path.parent / CACHE_DIR / f"{path.name}.{key}.npz"
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    where = hashlib.blake2b(str(path.resolve()).encode(), digest_size=6).hexdigest()
    return [beside, Path(home) / "hpcprof_kit" / "traces" / f"{path.name}.{where}.{key}.npz"]


def _writable(folder: Path) -> bool:
    """A folder we may add to: writable, and not marked read-only by its owner.

    The mode bits matter because root may write anywhere, yet a data set shipped read-only
    (``dr-xr-xr-x``) should stay as its owner left it.
    """
    try:
        return os.access(folder, os.W_OK) and bool(folder.stat().st_mode & 0o222)
    except OSError:
        return False


def read(path: str | os.PathLike[str], key: str) -> tuple[Part, Path] | None:
    """The cached part for ``path`` under ``key`` and where it lies, or None when there is
    none (or it is unreadable)."""
    for place in _places(Path(path), key):
        if not place.is_file():
            continue
        try:
            return parts.read(place), place
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            continue  # a damaged copy is just a miss; the trace is parsed again
    return None


def write(path: str | os.PathLike[str], key: str, part: Part) -> Path | None:
    """Store ``part`` for ``path``; returns where, or None when no place was writable."""
    for place in _places(Path(path), key):
        if place.parent.name == CACHE_DIR and not _writable(place.parent.parent):
            continue
        try:
            place.parent.mkdir(parents=True, exist_ok=True)
            # write aside, then rename: a reader never sees half a file
            fd, tmp = tempfile.mkstemp(dir=place.parent, suffix=".part")
            with os.fdopen(fd, "wb") as fh:
                parts.save(fh, part)
            os.replace(tmp, place)
            return place
        except OSError:
            continue
    return None
