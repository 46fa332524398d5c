"""A columnar copy of each loaded trace, so the second load of a file is near instant.

The copy (one rank's :class:`~hpcprof_kit.traces.read.parts.Part`: category codes, their
labels, integer columns, and the rank metadata as JSON) lives in the user's cache folder,
``$XDG_CACHE_HOME/hpcprof_kit/traces/<file>.<where>.<key>.npz`` (``~/.cache`` without
``XDG_CACHE_HOME``; ``$HPCPROF_TRACE_CACHE_DIR`` when set), never in the folder of the traces, which may be a colleague's data or a
shared project folder: ``<where>`` names the file by its whole path, and the key changes
whenever the file does (size, mtime in ns, a hash of its first and last MiB) or the
communication patterns do. ``HPCPROF_TRACE_CACHE=beside`` asks for the copy beside the traces
instead, in ``.hpcprof-cache/<file>.<key>.npz`` (the user's cache folder when the trace
folder is read-only), so that every user and node reading that folder shares it. If no place
is writable, nothing is cached and nothing fails.

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
WHERE = "HPCPROF_TRACE_CACHE"  # the switch: "home" (the default) or "beside"
PLACES = ("home", "beside")
FOLDER = "HPCPROF_TRACE_CACHE_DIR"  # the user's cache folder, when not the XDG one
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


def asked_place() -> str:
    """Where copies go, from ``$HPCPROF_TRACE_CACHE``: ``home`` (unset or empty) or ``beside``.

    >>> import os; os.environ[WHERE] = "next-to"
    >>> asked_place()
    Traceback (most recent call last):
    ...
    hpcprof_kit.errors.SpecError: HPCPROF_TRACE_CACHE='next-to' is not a place for the trace cache; set it to 'home' (the user's cache folder, the default) or 'beside' (.hpcprof-cache beside the traces), or unset it
    >>> del os.environ[WHERE]
    """
    from hpcprof_kit.errors import SpecError

    asked = os.environ.get(WHERE) or "home"
    if asked not in PLACES:
        raise SpecError(
            f"{WHERE}={asked!r} is not a place for the trace cache; set it to 'home' (the "
            "user's cache folder, the default) or 'beside' (.hpcprof-cache beside the traces), "
            "or unset it"
        )
    return asked


def cache_folder() -> Path:
    """The user's trace cache: ``$HPCPROF_TRACE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/hpcprof_kit/traces``, else ``~/.cache/hpcprof_kit/traces``."""
    if os.environ.get(FOLDER):
        return Path(os.environ[FOLDER])
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(home) / "hpcprof_kit" / "traces"


def _places(path: Path, key: str) -> list[Path]:
    """Where the copy may live: the user's cache folder; beside the trace first when asked."""
    where = hashlib.blake2b(str(path.resolve()).encode(), digest_size=6).hexdigest()
    mine = cache_folder() / f"{path.name}.{where}.{key}.npz"
    if asked_place() == "beside":
        return [path.parent / CACHE_DIR / f"{path.name}.{key}.npz", mine]
    return [mine]


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
