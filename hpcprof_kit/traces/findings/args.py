"""The few event arguments the rules read, from the trace files a table came from: copy bytes,
collective name, message bytes and group size (on the copy and collective kernels, keyed by
rank and correlation id) and the input types of the ops that launch kernels (keyed by rank and
External id). The events are found and decoded by :mod:`hpcprof_kit.traces.event_args_files`
(only those carrying such an argument; each file once per version), the reader
``traces.event_args`` uses; this module only keys them by the ids the rules join on.

>>> import json, tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t-0-of-1.json"
>>> _ = p.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "gpu_memcpy",
...     "name": "Memcpy HtoD (Pageable -> Device)", "ts": 1, "dur": 2,
...     "args": {"bytes": 64, "correlation": 5}}]}))
>>> cols = file_args(str(p))
>>> cols["bytes"].tolist(), cols["corr"].tolist()
([64], [5])
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from ...errors import TraceFormatError
from ..event_args_files import KINDS as KEYS_OF
from ..event_args_files import file_event_args
from ..event_args_table import DTYPE_BYTES
from ..events import ARG_KEYS
from ..memory_events import rank_files

COLUMNS = ("corr", "ext", "bytes", "coll", "group", "input_type")
KINDS = ("copies", "collectives", "inputs")  # the arguments the rules read


def _ids(values: list) -> np.ndarray:
    return np.array([-1 if v is None else v for v in values], dtype=np.int64)


def _types(text: str | None) -> str:
    """``'["float", "float"]'`` -> ``"float,float"`` ("" when not a list)."""
    try:
        types = msgspec.json.decode(text) if text else None
    except msgspec.DecodeError:
        return ""
    return ",".join(str(t) for t in types) if isinstance(types, list) else ""


def file_args(path: str) -> dict[str, np.ndarray]:
    """The kept arguments of one trace file as columns (``COLUMNS``), in file order: the
    events with a byte count, a collective's name or input types."""
    got = file_event_args(path, KINDS)
    keep = [i for i, (b, c, t) in enumerate(zip(got["bytes"], got["collective"],
            got["input_types"], strict=True)) if b is not None or c is not None or t]  # fmt: skip
    nbytes = []
    for i in keep:
        b, elems = got["bytes"][i], got["msg_elems"][i]
        if b is None and elems is not None:  # a collective: its elements times their size
            b = elems * DTYPE_BYTES.get(str(got["dtype"][i]), 4)
        nbytes.append(b)
    return {
        "corr": _ids([got["correlation"][i] for i in keep]),
        "ext": _ids([got["external_id"][i] for i in keep]),
        "bytes": _ids(nbytes),
        "coll": np.array([got["collective"][i] or "" for i in keep], dtype=object),
        "group": _ids([got["group_size"][i] for i in keep]),
        "input_type": np.array([_types(got["input_types"][i]) for i in keep], dtype=object),
    }


def holds_args(rank_meta: dict) -> bool:
    """Whether a rank's files may hold the arguments the rules read: the loader notes which
    argument keys each file's events hold (``arg_keys``; absent or None: not known).

    >>> holds_args({"arg_keys": ["grid"]}), holds_args({"arg_keys": ["bytes"]}), holds_args({})
    (False, True, True)
    """
    keys = rank_meta.get("arg_keys")
    return keys is None or not _NOTED or not _WANTED.isdisjoint(keys)


_WANTED = frozenset(k.decode() for kind in KINDS for k in KEYS_OF[kind])
# a key the rules read that the loader does not note (events.ARG_KEYS, the scanner's bits) could
# be in any file: then every file is searched, as before the loader noted keys
_NOTED = _WANTED.issubset(ARG_KEYS)


def run_args(meta: dict) -> Any:
    """The kept arguments of every rank in ``meta`` (``df.attrs["ranks"]``), with a ``rank``
    column; None when no file can be read (the table was built in memory, or moved). Files
    the loader found without any of the argument keys are not searched again."""
    import os

    import pandas as pd

    sources = [(int(rank), source, holds_args(m)) for rank, m in (meta or {}).items()
               for _, source in rank_files(m)]  # fmt: skip
    searched = iter(_read_each([s for _, s, holds in sources if holds]))
    frames, read = [], False
    for rank, source, holds in sources:
        # a file without the keys gives no rows, as its search would, if it is still there
        cols = next(searched) if holds else _NONE if os.path.isfile(source) else None
        if cols is None:
            continue
        read = True
        if not len(cols["corr"]):
            continue
        frame = pd.DataFrame(cols)
        frame.insert(0, "rank", rank)
        frames.append(frame)
    if not frames:  # no file read: None; files without any of the arguments: no rows
        return pd.DataFrame(columns=["rank", *COLUMNS]) if read else None
    return pd.concat(frames, ignore_index=True)


_NONE = {"corr": np.zeros(0, np.int64)}  # a file searched in vain: no rows


def _args_or_none(source: str) -> dict[str, np.ndarray] | None:
    """:func:`file_args` of one file, or None when it cannot be read."""
    try:
        return file_args(source)
    except (OSError, TraceFormatError, msgspec.DecodeError):
        return None


# More files than the reader's cache holds are read anew by every report, and searching them
# for the argument keys costs about as much as loading them: they are then read in parallel,
# as the loader reads them. Fewer are read here, where later reports find them in the cache.
PARALLEL_FROM = 33


def _read_each(sources: list[str]) -> list[dict[str, np.ndarray] | None]:
    """:func:`_args_or_none` of each file, in order: in this process, or, for many files,
    shared out by size among it and worker processes (one per CPU, as the loader does)."""
    import os

    workers = min(len(sources), os.cpu_count() or 1)
    if workers <= 1 or len(sources) < PARALLEL_FROM:
        return [_args_or_none(s) for s in sources]
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    from pathlib import Path

    from ..loader import _fork, lanes

    try:
        mine, theirs = lanes([Path(s) for s in sources], workers)
    except OSError:  # a file gone: read each here, as for few files (it is skipped)
        return [_args_or_none(s) for s in sources]
    got: dict[int, dict[str, np.ndarray] | None] = {}
    try:
        with ProcessPoolExecutor(max_workers=workers - 1, mp_context=_fork()) as pool:
            futures = {i: pool.submit(_args_or_none, sources[i]) for i in theirs}
            for i in mine:
                got[i] = _args_or_none(sources[i])
            for i, fut in futures.items():
                got[i] = fut.result()
    except (OSError, BrokenProcessPool):  # no worker could start or one died: read the rest here
        pass
    return [got[i] if i in got else _args_or_none(s) for i, s in enumerate(sources)]
