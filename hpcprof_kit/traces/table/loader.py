"""Load Kineto and unitrace traces of one or many ranks into the trace table.

>>> from hpcprof_kit import traces                                 # doctest: +SKIP
>>> df = traces.load("runs/train_local_N1_R2_20260101-120000/traces")   # doctest: +SKIP
>>> df.groupby(["rank", "track"], observed=True).dur_ns.sum()       # doctest: +SKIP

Each file becomes columns in its own process (ranks load in parallel), then the parts are
joined with shared categories. Ranks come from ``distributedInfo``, else the file name
(``<prefix>-<rank>-of-<world>.json``, unitrace ``<app>.<pid>.<rank>.json``), else unitrace's
``RANK n`` process names, else 0 with a warning.

A schedule that repeats writes one file per cycle and rank (``<prefix>-0-of-2.json``,
``<prefix>_cycle1-0-of-2.json``, ...): they load as one run, the ``cycle`` column saying which
file each event came from. Two files of one rank conflict only when they claim the same cycle
or carry different prefixes (two runs).
"""

from __future__ import annotations

import glob
import os
import re
import sys
import tempfile
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces.read import parts
from hpcprof_kit.traces.read.naming import check_one_run, cycle_from_file_name, rank_from_file_name
from hpcprof_kit.traces.read.parts import Part, code_dtype, join
from hpcprof_kit.traces.read.patterns import PatternList, comm_labels

TRACE_SUFFIXES = (".json", ".json.gz")
# What names trace files: a file, a folder, a glob, or a list of those.
TracePaths = (
    str | os.PathLike[str] | list[str | os.PathLike[str]] | tuple[str | os.PathLike[str], ...]
)
# What marks a run directory (its traces are in traces/).
RUN_DIR_MARKERS = ("manifest.json", "spec.json")
_STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
_DEVICE_TRACKS = ("gpu", "comm", "memcpy", "memset", "gpu_annotation")


def find_trace_files(path_or_dir_or_glob: TracePaths) -> list[Path]:
    """The trace files a path names: the file itself, a folder's ``*.json[.gz]``, a run
    directory's ``traces/`` folder, or a glob; or a list of such paths (each must name at
    least one file; a file named twice counts once).

    >>> find_trace_files("no/such/folder")
    Traceback (most recent call last):
    ...
    hpcprof_kit.errors.TraceFormatError: no trace files at 'no/such/folder': expected a .json/.json.gz file, a folder holding them, or a glob such as 'traces/*.json.gz'
    """
    if isinstance(path_or_dir_or_glob, (list, tuple)):
        if not path_or_dir_or_glob:
            raise TraceFormatError("no trace files: the list of paths is empty")
        found = [f for item in path_or_dir_or_glob for f in find_trace_files(item)]
        return list(dict.fromkeys(found))  # in the order given, each file once
    text = os.fspath(path_or_dir_or_glob)
    p = Path(text)
    if p.is_file():
        return [p]
    if p.is_dir() and any((p / m).is_file() for m in RUN_DIR_MARKERS):
        p = p / "traces"  # a run directory: its own .json files are not traces
        if not p.is_dir():
            raise TraceFormatError(
                f"{text!r} is a run directory without a traces/ folder; run the job with "
                "profiling on (profile=True, or make_profiler in your script) to get traces"
                + _why_no_traces(p.parent)
            )
    if p.is_dir():
        files = [f for f in sorted(p.iterdir()) if f.is_file() and f.name.endswith(TRACE_SUFFIXES)]
    else:
        files = [Path(f) for f in sorted(glob.glob(text)) if Path(f).is_file()]
    if not files:
        run_dir = next((d for d in (p, p.parent) if (d / "manifest.json").is_file()), None)
        raise TraceFormatError(
            f"no trace files at {text!r}: expected a .json/.json.gz file, a folder holding "
            "them, or a glob such as 'traces/*.json.gz'"
            + (_why_no_traces(run_dir) if run_dir is not None else "")
        )
    return files


def _why_no_traces(run_dir: Path) -> str:
    """The reason a run wrote no trace, as the end of the loader's message ('' if unknown)."""
    from hpcprof_kit.profiling.script_check import why_no_traces

    reason = why_no_traces(run_dir)
    return f". Why: {reason}" if reason else ""


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
    path = Path(path)
    found, keys = _lookup([path], cache, comm_patterns)
    part = found[0] if found else _parse_and_store(path, keys[0], comm_patterns)[0]
    _emit(path, part.meta)
    return part.frame()


def load(
    path_or_dir_or_glob: TracePaths,
    *,
    workers: int | None = None,
    cache: bool = True,
    comm_patterns: PatternList | None = None,
) -> Any:
    """Every trace file a path names (a file, a folder, a glob, or a list of them), as one
    trace table (see ``schema.COLUMNS``).

    ``workers`` processes read files in parallel, this one among them (default: one per
    file not in the cache, at most one per CPU); ``cache`` keeps a columnar copy in the user's
    cache folder (beside the traces with ``HPCPROF_TRACE_CACHE=beside``: ``read.cache``) so
    the next load is near instant; ``comm_patterns`` replaces
    ``patterns.COMM_PATTERNS`` for this load.

    >>> df = load("runs/train_local_N1_R2_20260101-120000/traces")   # doctest: +SKIP
    >>> sorted(df.attrs["ranks"])                                       # doctest: +SKIP
    [0, 1]
    """
    files = find_trace_files(path_or_dir_or_glob)
    found, keys = _lookup(files, cache, comm_patterns)
    todo = [i for i in range(len(files)) if i not in found]
    if workers is None:
        workers = min(len(todo), os.cpu_count() or 1)
    if workers <= 1 or len(todo) <= 1:
        parsed = [_parse_and_store(files[i], keys[i], comm_patterns)[0] for i in todo]
    else:
        todo_keys = [keys[i] for i in todo]
        parsed = _load_in_workers([files[i] for i in todo], todo_keys, workers, comm_patterns)
    fresh = iter(parsed)
    found = [found[i] if i in found else next(fresh) for i in range(len(files))]
    for f, part in zip(files, found, strict=True):
        _emit(f, part.meta)
    check_one_run(files, found)
    table = join(found)
    if not isinstance(path_or_dir_or_glob, (list, tuple)):
        from hpcprof_kit.traces.table.placement import read_placement

        placed = read_placement(path_or_dir_or_glob)
        if placed is not None:  # where each rank ran: the run directory's record
            table.attrs["placement"] = placed
    return table


def _emit(path: Path, meta: dict) -> None:
    for note in meta["warnings"]:
        warnings.warn(f"{path.name}: {note}", stacklevel=3)


def _lookup(
    files: list[Path], cache: bool, comm_patterns: PatternList | None
) -> tuple[dict[int, Part], list[str | None]]:
    """Each file's cache key (None when not caching), and the parts whose cache copy is
    current, read here: a copy reads faster than a worker process starts."""
    from hpcprof_kit.traces.read import cache as trace_cache

    keys = [trace_cache.cache_key(f, comm_patterns) if cache else None for f in files]
    found = {}
    for i, (f, key) in enumerate(zip(files, keys, strict=True)):
        hit = trace_cache.read(f, key) if key is not None else None
        if hit is not None:
            found[i] = hit[0]
    return found, keys


def _load_in_workers(
    files: list[Path], keys: list[str | None], workers: int, comm_patterns: PatternList | None
) -> list[Part]:
    """Parse files in parallel: this process takes one lane of files, ``workers - 1`` worker
    processes the others (:func:`lanes`). A worker hands its part back as a file (its cache
    copy, or one in ``/dev/shm`` when there is one): pickling ~100 MB of columns through the
    pool's pipe and unpickling it here cost more than the parse it was parallelising."""
    mine, theirs = lanes(files, workers)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    found: dict[int, Part] = {}
    with (
        tempfile.TemporaryDirectory(prefix="hpcprof-load-", dir=shm) as tmp,
        ProcessPoolExecutor(max_workers=max(1, workers - 1), mp_context=_fork()) as pool,
    ):
        futures = {
            i: pool.submit(
                _load_one_to_file, files[i], keys[i], comm_patterns, Path(tmp) / f"{i}.npz"
            )
            for i in theirs
        }
        try:
            for i in mine:
                found[i] = _parse_and_store(files[i], keys[i], comm_patterns)[0]
            for i, fut in futures.items():
                got = fut.result()
                found[i] = parts.read(got, mapped=True) if isinstance(got, Path) else got
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)  # files not started are not parsed
            raise
    return [found[i] for i in range(len(files))]


def _fork() -> Any:
    """On Linux, workers forked from this process, which start at once with its imports
    (Python 3.14 made ``forkserver`` the default there, whose workers import NumPy and the
    parser anew). Elsewhere the platform's default: macOS spawns, as forking a process that
    has used its system frameworks can crash."""
    import multiprocessing

    return multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None


def lanes(files: list[Path], workers: int) -> tuple[list[int], list[int]]:
    """Share files out among ``workers`` lanes by size (largest first, each to the lightest
    lane): the indexes this process parses, and those left to the worker processes.

    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> fs = [d / f"t-{r}-of-3.json" for r in range(3)]
    >>> for f, size in zip(fs, (30, 10, 20)): _ = f.write_bytes(b" " * size)
    >>> lanes(fs, 2)
    ([0], [2, 1])
    """
    sizes = [os.path.getsize(f) for f in files]
    load_of = [0] * workers
    lane_of: dict[int, int] = {}
    for i in sorted(range(len(files)), key=lambda i: -sizes[i]):
        lane = min(range(workers), key=lambda w: load_of[w])
        lane_of[i] = lane
        load_of[lane] += sizes[i]
    ordered = sorted(lane_of, key=lambda i: -sizes[i])
    return [i for i in ordered if lane_of[i] == 0], [i for i in ordered if lane_of[i] != 0]


def _load_one_to_file(
    path: Path, key: str | None, comm_patterns: PatternList | None, out: Path
) -> Path | Part:
    """Worker side of :func:`_load_in_workers`: parse one file and return where its part is
    stored: the cache copy when one was written, else ``out``. Returns
    the part itself when ``out`` cannot be written (a full or small ``/dev/shm``): it then
    travels back through the pool's pipe instead.
    """
    part, stored = _parse_and_store(path, key, comm_patterns)
    if stored is not None:
        return stored
    try:
        with out.open("wb") as fh:
            parts.save(fh, part)
    except OSError:
        out.unlink(missing_ok=True)
        return part
    return out


def _parse_and_store(
    path: Path, key: str | None, comm_patterns: PatternList | None
) -> tuple[Part, Path | None]:
    """Parse one file and keep a cache copy under ``key`` (None: no copy): the part, and
    where the copy lies."""
    from hpcprof_kit.traces.read import cache as trace_cache

    part = _parse(path, comm_patterns)
    stored = trace_cache.write(path, key, part) if key is not None else None
    return part, stored


def _parse(path: Path, comm_patterns: PatternList | None) -> Part:
    from hpcprof_kit.traces.read import kineto, stream, unitrace
    from hpcprof_kit.traces.table.schema import COLUMNS, TRACKS

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
    columns: dict[str, np.ndarray] = {"rank": np.full(n_events, rank, dtype=np.int32)}
    labels: dict[str, list[str]] = {}
    for col in ("pid", "tid", "track", "cat", "name"):
        if col == "track":
            columns[col], labels[col] = tracks.astype(np.int8), list(TRACKS)
        else:
            columns[col], labels[col] = _as_text(cols[col], trace.vocab[col])
    for col in ("ts_ns", "dur_ns", "corr", "ext_id", "stream"):
        columns[col] = cols[col]
    columns["step"] = _steps(trace, tracks, TRACKS)
    meta["cycle"] = cycle_from_file_name(path.name)[1]
    columns["cycle"] = np.full(n_events, meta["cycle"], dtype=np.int16)
    columns["device"] = cols["device"].astype(np.int32)
    meta["events"] = n_events
    if n_events == 0:
        meta["warnings"].append("the trace holds no complete (X) or instant (i) events")
    return Part({c: columns[c] for c in COLUMNS}, labels, rank, meta, trace.args)


def _as_text(codes: np.ndarray, vocab: list) -> tuple[np.ndarray, list[str]]:
    """Codes over raw JSON values (ints, strings, None) -> codes over their text labels."""
    unique: dict[str, int] = {}
    remap = [unique.setdefault("" if v is None else str(v), len(unique)) for v in vocab] or [0]
    return np.array(remap, dtype=code_dtype(len(unique)))[codes], list(unique) or [""]


def _rank_and_meta(path: Path, trace: Any, fmt: str) -> tuple[int, dict]:
    from hpcprof_kit.traces.read import unitrace

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
        "skipped": trace.skipped.count,  # bad events left out (the warnings say which, why)
        # which argument keys its events hold (None: not known): the rules read only those files
        "arg_keys": None if trace.arg_keys is None else list(trace.arg_keys),
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
    # the host's ProfilerStep spans only: CUDA traces mirror each one on the device as a short
    # gpu_user_annotation, which would otherwise end the host's step early for what follows
    mirror = tracks == track_names.index("gpu_annotation")
    is_step = (numbers >= 0) & ~cols["instant"] & ~mirror
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
