"""Load Kineto and unitrace traces of one or many ranks into the trace table.

>>> from hpcprof_kit import traces                                 # doctest: +SKIP
>>> df = traces.load("runs/train_local_N1_R2_20260101-120000/traces")   # doctest: +SKIP
>>> df.groupby(["rank", "track"], observed=True).dur_ns.sum()       # doctest: +SKIP

Each file becomes columns in its own process (ranks load in parallel), then the parts are
joined with shared categories. Ranks come from ``distributedInfo``, else the file name
(``<prefix>-<rank>-of-<world>.json``, unitrace ``<app>.<pid>.<rank>.json``), else unitrace's
``RANK n`` process names, else 0 with a warning.
"""

from __future__ import annotations

import glob
import os
import re
import tempfile
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TraceFormatError
from .patterns import PatternList, comm_labels

TRACE_SUFFIXES = (".json", ".json.gz")
# File-name rank patterns, as data: (regex, group of the rank, group of the world size or 0).
RANK_IN_NAME = [
    (re.compile(r"-(\d+)-of-(\d+)\.json(\.gz)?$"), 1, 2),  # the kit's own naming
    (re.compile(r"\.(\d+)\.(\d+)\.json(\.gz)?$"), 2, 0),  # unitrace <app>.<pid>.<rank>.json
    (re.compile(r"rank[_-]?(\d+)(?:[_-]of[_-](\d+))?", re.IGNORECASE), 1, 2),
]
_STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
_DEVICE_TRACKS = ("gpu", "comm", "memcpy", "memset", "gpu_annotation")


def find_trace_files(path_or_dir_or_glob: str | os.PathLike[str]) -> list[Path]:
    """The trace files a path names: the file itself, a folder's ``*.json[.gz]``, or a glob.

    >>> find_trace_files("no/such/folder")
    Traceback (most recent call last):
    ...
    hpcprof_kit.errors.TraceFormatError: no trace files at 'no/such/folder': expected a .json/.json.gz file, a folder holding them, or a glob such as 'traces/*.json.gz'
    """
    text = os.fspath(path_or_dir_or_glob)
    p = Path(text)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = [f for f in sorted(p.iterdir()) if f.is_file() and f.name.endswith(TRACE_SUFFIXES)]
    else:
        files = [Path(f) for f in sorted(glob.glob(text)) if Path(f).is_file()]
    if not files:
        raise TraceFormatError(
            f"no trace files at {text!r}: expected a .json/.json.gz file, a folder holding "
            "them, or a glob such as 'traces/*.json.gz'"
        )
    return files


def rank_from_file_name(name: str) -> tuple[int | None, int | None]:
    """(rank, world size) from a trace file name, or (None, None).

    >>> rank_from_file_name("train-3-of-8.json.gz"), rank_from_file_name("python.1234.5.json")
    ((3, 8), (5, None))
    """
    for regex, rank_group, world_group in RANK_IN_NAME:
        m = regex.search(name)
        if m:
            world = m.group(world_group) if world_group else None
            return int(m.group(rank_group)), int(world) if world else None
    return None, None


def load_file(
    path: str | os.PathLike[str],
    *,
    cache: bool = True,
    comm_patterns: PatternList | None = None,
) -> Any:
    """One trace file as a trace table (rank resolved from the file alone).

    >>> df = load_file("traces/train-0-of-2.json.gz")   # doctest: +SKIP
    >>> df.attrs["ranks"][0]["world_size"]              # doctest: +SKIP
    2
    """
    df, _ = _load_one(Path(path), cache, comm_patterns)
    _emit(Path(path), next(iter(df.attrs["ranks"].values())))
    return df


def load(
    path_or_dir_or_glob: str | os.PathLike[str],
    *,
    workers: int | None = None,
    cache: bool = True,
    comm_patterns: PatternList | None = None,
) -> Any:
    """Every trace file a path names, as one trace table (see ``schema.COLUMNS``).

    ``workers`` processes read files in parallel (default: one per file, at most one per
    CPU); ``cache`` keeps a columnar copy beside the traces so the next load is near
    instant; ``comm_patterns`` replaces ``patterns.COMM_PATTERNS`` for this load.

    >>> df = load("runs/train_local_N1_R2_20260101-120000/traces")   # doctest: +SKIP
    >>> sorted(df.attrs["ranks"])                                       # doctest: +SKIP
    [0, 1]
    """
    import pandas as pd

    files = find_trace_files(path_or_dir_or_glob)
    if workers is None:
        workers = min(len(files), os.cpu_count() or 1)
    if workers <= 1 or len(files) == 1:
        parts = [_load_one(f, cache, comm_patterns) for f in files]
    else:
        parts = _load_in_workers(files, workers, cache, comm_patterns)
    claimed: dict[int, Path] = {}
    tables, ranks = [], {}
    for f, (df, _) in zip(files, parts, strict=True):
        rank, meta = next(iter(df.attrs["ranks"].items()))
        _emit(f, meta)
        if rank in claimed:
            raise TraceFormatError(
                f"two files claim rank {rank}: {claimed[rank]} and {f}; load them separately "
                "(they are different runs) or rename one as <prefix>-<rank>-of-<world>.json"
            )
        claimed[rank] = f
        ranks[rank] = meta
        tables.append(df)
    out = _concat(tables, pd)
    out.attrs["ranks"] = dict(sorted(ranks.items()))
    return out


def _emit(path: Path, meta: dict) -> None:
    for note in meta["warnings"]:
        warnings.warn(f"{path.name}: {note}", stacklevel=3)


def _concat(tables: list, pd: Any) -> Any:
    if len(tables) == 1:
        return tables[0]
    from pandas.api.types import union_categoricals

    data = {}
    for col in tables[0].columns:
        if isinstance(tables[0][col].dtype, pd.CategoricalDtype):
            data[col] = union_categoricals([t[col] for t in tables])
        else:
            data[col] = np.concatenate([t[col].to_numpy() for t in tables])
    return pd.DataFrame(data)


def _load_in_workers(
    files: list[Path], workers: int, cache: bool, comm_patterns: PatternList | None
) -> list[tuple[Any, int]]:
    """Parse files in worker processes. Tables come back through a file in shared memory
    (``/dev/shm`` when there is one): pickling ~100 MB of columns through the pool's pipe and
    unpickling it here cost more than the parse it was parallelising."""
    from . import cache as trace_cache

    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="hpcprof-load-", dir=shm) as tmp:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [
                pool.submit(_load_one_to_file, f, cache, comm_patterns, Path(tmp) / f"{i}.npz")
                for i, f in enumerate(files)
            ]
            stored = [fut.result() for fut in futures]
        return [
            (trace_cache.read_table(table) if isinstance(table, Path) else table, rank)
            for table, rank in stored
        ]


def _load_one_to_file(
    path: Path, cache: bool, comm_patterns: PatternList | None, out: Path
) -> tuple[Any, int]:
    """Worker side of :func:`_load_in_workers`: parse one file, store its table at ``out``.

    Returns ``(out, rank)``, or ``(table, rank)`` when ``out`` cannot be written (a full or
    small ``/dev/shm``): the table then travels back through the pool's pipe instead.
    """
    from . import cache as trace_cache

    df, rank = _load_one(path, cache, comm_patterns)
    try:
        with out.open("wb") as fh:
            trace_cache.save_table(fh, df)
    except OSError:
        out.unlink(missing_ok=True)
        return df, rank
    return out, rank


def _load_one(path: Path, cache: bool, comm_patterns: PatternList | None) -> tuple[Any, int]:
    """Parse (or fetch from the cache) one file; returns (table, rank). Runs in a worker."""
    from . import cache as trace_cache

    key = trace_cache.cache_key(path, comm_patterns) if cache else None
    if key is not None:
        hit = trace_cache.read(path, key)
        if hit is not None:
            return hit, next(iter(hit.attrs["ranks"]))
    df = _parse(path, comm_patterns)
    if key is not None:
        trace_cache.write(path, key, df)
    return df, next(iter(df.attrs["ranks"]))


def _parse(path: Path, comm_patterns: PatternList | None) -> Any:
    import pandas as pd

    from . import kineto, stream, unitrace
    from .schema import COLUMNS, TRACKS

    trace = stream.read_chrome(path)
    cols = trace.columns
    n_events = len(cols["ts_ns"])
    fmt = "unitrace" if unitrace.looks_like_unitrace(trace) else "kineto"
    comm = np.array(
        [lab is not None for lab in comm_labels(trace.vocab["name"], comm_patterns)] or [False]
    )
    if fmt == "unitrace":
        tracks = unitrace.unitrace_tracks(trace, comm)
        unitrace.device_and_stream(trace)
    else:
        tracks = kineto.kineto_tracks(trace, comm)
    rank, meta = _rank_and_meta(path, trace, fmt)
    steps = _steps(trace, tracks, TRACKS)
    data: dict[str, Any] = {"rank": np.full(n_events, rank, dtype=np.int32)}
    for col in ("pid", "tid"):
        data[col] = _categorical(cols[col], trace.vocab[col], pd)
    data["track"] = pd.Categorical.from_codes(tracks.astype(np.int8), categories=list(TRACKS))
    for col in ("cat", "name"):
        data[col] = _categorical(cols[col], trace.vocab[col], pd)
    data["ts_ns"] = cols["ts_ns"]
    data["dur_ns"] = cols["dur_ns"]
    data["step"] = steps
    data["corr"] = cols["corr"]
    data["ext_id"] = cols["ext_id"]
    data["device"] = cols["device"].astype(np.int32)
    data["stream"] = cols["stream"]
    df = pd.DataFrame({c: data[c] for c in COLUMNS})
    meta["events"] = n_events
    if n_events == 0:
        meta["warnings"].append("the trace holds no complete (X) or instant (i) events")
    df.attrs["ranks"] = {rank: meta}
    return df


def _categorical(codes: np.ndarray, vocab: list, pd: Any) -> Any:
    """Codes over raw JSON values (ints, strings, None) -> a categorical over their text."""
    unique: dict[str, int] = {}
    remap = np.array(
        [unique.setdefault("" if v is None else str(v), len(unique)) for v in vocab] or [0]
    )
    return pd.Categorical.from_codes(remap[codes].astype(np.int32), categories=list(unique) or [""])


def _rank_and_meta(path: Path, trace: Any, fmt: str) -> tuple[int, dict]:
    from . import unitrace

    info = trace.header.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    name_rank, name_world = rank_from_file_name(path.name)
    notes = list(trace.warnings)
    if isinstance(info.get("rank"), int):
        rank, source = info["rank"], "distributedInfo"
    elif name_rank is not None:
        rank, source = name_rank, "file name"
    elif fmt == "unitrace" and unitrace.rank_from_process_names(trace.process_names) is not None:
        rank, source = unitrace.rank_from_process_names(trace.process_names), "process names"
    else:
        rank, source = 0, "default"
        notes.append(
            "no rank in distributedInfo, file name or process names; taken as rank 0 "
            "(name files <prefix>-<rank>-of-<world>.json to say which rank they are)"
        )
    world = info.get("world_size") if isinstance(info.get("world_size"), int) else name_world
    return rank, {
        "world_size": world,
        "backend": info.get("backend"),
        "device_properties": trace.header.get("deviceProperties") or [],
        "source": str(path),
        "format": fmt,
        "warnings": notes,
        "rank_source": source,
        "bytes": trace.text_bytes,
    }


def _steps(trace: Any, tracks: np.ndarray, track_names: tuple) -> np.ndarray:
    """ProfilerStep number containing each event's start; device work by its launch's step."""
    cols = trace.columns
    ts = cols["ts_ns"]
    out = np.full(len(ts), -1, dtype=np.int32)
    step_of_name = np.full(len(trace.vocab["name"]) or 1, -1, dtype=np.int64)
    for i, n in enumerate(trace.vocab["name"]):
        m = _STEP_NAME.match(str(n))
        if m:
            step_of_name[i] = int(m.group(1))
    numbers = step_of_name[cols["name"]]
    is_step = (numbers >= 0) & ~cols["instant"]
    if not is_step.any():
        return out
    order = np.argsort(ts[is_step], kind="stable")
    starts = ts[is_step][order]
    ends = starts + cols["dur_ns"][is_step][order]
    nums = numbers[is_step][order]
    idx = np.searchsorted(starts, ts, side="right") - 1
    inside = (idx >= 0) & (ts < ends[np.maximum(idx, 0)])
    out[inside] = nums[idx[inside]]
    # device work belongs to the step that launched it (matched by correlation id)
    device_codes = [track_names.index(t) for t in _DEVICE_TRACKS]
    on_device = np.isin(tracks, device_codes) & (cols["corr"] >= 0)
    launches = (tracks == track_names.index("runtime")) & (cols["corr"] >= 0)
    if on_device.any() and launches.any():
        lc = cols["corr"][launches]
        ls = out[launches]
        sort = np.argsort(lc, kind="stable")
        lc, ls = lc[sort], ls[sort]
        dc = cols["corr"][on_device]
        pos = np.clip(np.searchsorted(lc, dc), 0, len(lc) - 1)
        found = lc[pos] == dc
        dev_steps = out[on_device]
        dev_steps[found] = ls[pos[found]]
        out[on_device] = dev_steps
    return out
