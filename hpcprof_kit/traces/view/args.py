"""The few event arguments the rules read, of every rank of a table: copy bytes, collective
name, message bytes and group size (on the copy and collective kernels, keyed by rank and
correlation id) and the input types of the ops that launch kernels (keyed by rank and External
id). The loader keeps them as it reads each file (:mod:`hpcprof_kit.traces.read.kept_args`); a
file it did not keep them for (an older cache copy, a table built another way) is searched
here, for the same columns.

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

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces.read.event_args_files import _event_objects
from hpcprof_kit.traces.read.kept_args import (
    ANCHOR_BITS,
    ANCHORS,
    COLUMNS,
    RULE_KINDS,
    KeptArgs,
    columns_of,
)
from hpcprof_kit.traces.read.memory_events import file_version, rank_files


def file_args(path: str) -> dict[str, np.ndarray]:
    """The kept arguments of one trace file as columns (``COLUMNS``), in file order: the
    events with a byte count, a collective's name or input types, searched for in the file
    (once per version of it)."""
    return _file_args(*file_version(path, "event arguments are"))


@lru_cache(maxsize=32)
def _file_args(path: str, size: int, mtime_ns: int) -> dict[str, np.ndarray]:
    return columns_of(_event_objects(Path(path), RULE_KINDS)[0])


def holds_args(rank_meta: dict) -> bool:
    """Whether a rank's files may hold the arguments the rules read: the loader notes which
    argument keys each file's events hold (``arg_keys``; absent or None: not known).

    >>> holds_args({"arg_keys": ["grid"]}), holds_args({"arg_keys": ["bytes"]}), holds_args({})
    (False, True, True)
    """
    keys = rank_meta.get("arg_keys")
    # a key the rules read that the loader does not note (events.ARG_KEYS, the scanner's bits)
    # could be in any file (no ANCHOR_BITS): then every file is searched
    return keys is None or ANCHOR_BITS is None or not ANCHORS.isdisjoint(keys)


def run_args(meta: dict) -> Any:
    """The kept arguments of every rank in ``meta`` (``df.attrs["ranks"]``), with a ``rank``
    column; None when nothing is known of any file (the table was built in memory, or its
    files moved before the loader kept their arguments). Only the files whose arguments the
    loader did not keep are searched, and of those only the ones it found any key in."""
    import pandas as pd

    sources = []
    for rank, m in (meta or {}).items():
        kept = m.get("event_args")  # its text alone after a trip through JSON (parquet)
        for _, source in rank_files(m):
            cols = kept.get(source) if isinstance(kept, KeptArgs) else None
            sources.append((int(rank), source, cols, cols is None and holds_args(m)))
    searched = iter(_read_each([s for _, s, _, search in sources if search]))
    blocks, read = [], False
    for rank, source, kept_cols, search in sources:
        # a file without the keys gives no rows, as its search would, if it is still there
        cols = (kept_cols if kept_cols is not None else next(searched) if search
                else _NONE if os.path.isfile(source) else None)  # fmt: skip
        if cols is None:
            continue
        read = True
        if len(cols["corr"]):
            blocks.append((np.full(len(cols["corr"]), rank, dtype=np.int64), cols))
    if not blocks:  # no file read: None; files without any of the arguments: no rows
        return pd.DataFrame(columns=["rank", *COLUMNS]) if read else None
    # one frame over the joined columns (a frame per file, then concat, cost 10x more)
    joined = {"rank": np.concatenate([r for r, _ in blocks])}
    joined.update({c: np.concatenate([cols[c] for _, cols in blocks]) for c in COLUMNS})
    return pd.DataFrame(joined)


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
    workers = min(len(sources), os.cpu_count() or 1)
    if workers <= 1 or len(sources) < PARALLEL_FROM:
        return [_args_or_none(s) for s in sources]
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from hpcprof_kit.traces.table.loader import _fork, lanes

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
