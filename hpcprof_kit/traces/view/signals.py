"""The signals the rules read: per rank and step (-1: outside every step), the counts and
times each rule measures, small enough to keep in a rank's summary. Summed or combined over
ranks they give what the rules give on the whole table, so a report made of per-rank
summaries finds what a report of the table finds.

>>> SIGNAL_COLUMNS[:4]
['rank', 'step', 'kernels', 'short_kernels']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.analyses.blocking_copies import D2H, blocking_copies
from hpcprof_kit.traces.analyses.breakdown import bare, text_test
from hpcprof_kit.traces.analyses.launch_pacing import launch_gaps
from hpcprof_kit.traces.table.distinct import distinct
from hpcprof_kit.traces.view import host_signals as H
from hpcprof_kit.traces.view import names as N
from hpcprof_kit.traces.view.idle_host import NUMERIC as IDLE_NUMERIC
from hpcprof_kit.traces.view.idle_host import idle_host

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

SHORT_KERNEL_NS = 10_000
SMALL_COLL_BYTES = 1 << 20  # below this an all-reduce is latency-bound (nccl-tests' knee)
BIG_COLL_BYTES = 4 << 20  # from this on an all-reduce is bandwidth-bound
DRAINED_NS = 500_000  # a device idle this long before a sync had drained: the sync cost nothing
NUMERIC = ["kernels", "short_kernels", "short_ns", "sync_idle_ns", "sync_calls", "regions",
           "kernel_ns", "loader_ns", "loader_idle_ns", "named_copies", "pageable_ns",
           "pageable_bytes", "d2h_block_ns", "d2h_bytes", "alloc_calls", "alloc_ns",
           "launch_idle_ns", "tiny_kernels", "gemm_ns", "fp32_gemm_ns", "colls", "sized_colls",
           "small_colls", "small_coll_ns", "big_coll_busbytes", "big_coll_ns", "tiny_ops",
           "tiny_op_ns", "memory_events", "churn_blocks", "churn_ns",
           *IDLE_NUMERIC]  # fmt: skip
TEXT = ["region_names", "coll_exposed", "idle_host_ops"]
SIGNAL_COLUMNS = ["rank", "step", *NUMERIC, *TEXT]
# the device-to-host copies the host waited for (:func:`copy_waits`): what a rank's summary
# keeps of each, for the rule's evidence
WAIT_COLUMNS = ["rank", "step", "op", "call", "ts_ns", "host_wait_ns", "copy_ns",
                "idle_after_ns", "named"]  # fmt: skip


def rows_by_rank(rows: np.ndarray, rank: np.ndarray) -> dict[int, np.ndarray]:
    """``rows`` split by their rank (ranks ascending), each part in the order ``rows`` had:
    one sort, not one pass over the table per rank.

    >>> {r: v.tolist() for r, v in rows_by_rank(np.array([0, 1, 3]), np.array([1, 0, 5, 1])).items()}
    {0: [1], 1: [0, 3]}
    """
    if not rows.size:
        return {}
    rows = rows[np.argsort(rank[rows], kind="stable")]
    ranks = rank[rows]
    cut = np.flatnonzero(ranks[1:] != ranks[:-1]) + 1
    return {int(ranks[i]): p for i, p in zip(np.r_[0, cut],
            np.split(rows, cut), strict=True)}  # fmt: skip


def _by(rank, step, values, name: str):
    import pandas as pd

    frame = pd.DataFrame({"rank": rank, "step": step, name: values})
    return frame.groupby(["rank", "step"])[name].sum()


class _Busy:
    """One rank's device busy time as merged intervals, to ask how much of a window it covers."""

    def __init__(self, ts: np.ndarray, end: np.ndarray):
        order = np.argsort(ts, kind="stable")
        ts, end = ts[order], np.maximum.accumulate(end[order]) if ts.size else end
        new = np.ones(ts.size, dtype=bool)
        new[1:] = ts[1:] > end[:-1]
        self.start = ts[new]
        self.end = np.maximum.reduceat(end, np.flatnonzero(new)) if ts.size else end
        self.cum = np.concatenate([[0], np.cumsum(self.end - self.start)])

    def before(self, t: np.ndarray) -> np.ndarray:
        """Busy time before each ``t``."""
        i = np.searchsorted(self.start, t, side="right") - 1
        inside = np.where(i >= 0, np.minimum(t, self.end[np.maximum(i, 0)]) - self.start[
            np.maximum(i, 0)], 0)  # fmt: skip
        return np.where(i >= 0, self.cum[np.maximum(i, 0)] + inside, 0)

    def covered(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.before(b) - self.before(a)


def signals(df: pd.DataFrame, gaps: pd.DataFrame | None = None, meta: dict | None = None,
            args: pd.DataFrame | None = None,
            waits: pd.DataFrame | None = None) -> pd.DataFrame:  # fmt: skip
    """Per rank and step the columns of ``SIGNAL_COLUMNS``: kernels (all, under 10 µs, their
    ns, all kernel ns), the device idle after host syncs (:func:`sync_gaps`) and their calls,
    the compiled regions, the DataLoader's host time and the device idle during it, copies
    whose name says the memory kind, pageable host-to-device copies (ns, bytes), the host's
    wait for device-to-host copies of any size (:func:`copy_waits`, ``waits`` when given) and
    the bytes of those from 10 µs on, device allocations and frees (calls, ns), the device
    idle before tiny kernels while none of its streams ran
    (:func:`~hpcprof_kit.traces.analyses.launch_pacing.launch_gaps`), GEMM time and its
    fp32 part, and collectives (count, with known size, small ones and their ns, the big
    ones' bus bytes and ns, and the exposed ns of each collective by name,
    :func:`~hpcprof_kit.traces.analyses.collectives.collective_kernels`), the device's idle
    by what the host did meanwhile (:func:`~hpcprof_kit.traces.view.idle_host.idle_host`); on a
    rank without a
    device, its loops of tiny host ops and the large host blocks it allocates and frees
    inside a step (:mod:`.host_signals`). ``meta`` (default ``df.attrs["ranks"]``) names the
    files the arguments are read from, unless ``args``
    (:func:`~hpcprof_kit.traces.view.args.run_args`) is given."""
    import pandas as pd

    meta = df.attrs.get("ranks", {}) if meta is None else meta
    table = df  # as loaded: the collectives' sizes are read from the files it names
    df = bare(df)
    key = ["rank", "step"]
    rank = df["rank"].to_numpy(dtype=np.int64)
    step = df["step"].to_numpy(dtype=np.int64)
    dur = df["dur_ns"].to_numpy(dtype=np.int64)
    ts = df["ts_ns"].to_numpy(dtype=np.int64)
    dev = df["device"].to_numpy() >= 0
    track = _Labels(df["track"])

    def has(pattern) -> np.ndarray:
        return text_test(df["name"], lambda s: s.str.contains(pattern, regex=True))

    corr = df["corr"].to_numpy(dtype=np.int64)
    ext = df["ext_id"].to_numpy(dtype=np.int64)
    parts: list[pd.Series | pd.DataFrame] = []
    gpu = (track == "gpu") & dev
    short = gpu & (dur < SHORT_KERNEL_NS)
    parts += [_by(rank[gpu], step[gpu], 1, "kernels"), _by(rank[short], step[short], 1,
              "short_kernels"), _by(rank[short], step[short], dur[short], "short_ns"),
              _by(rank[gpu], step[gpu], dur[gpu], "kernel_ns")]  # fmt: skip
    gaps = sync_gaps(df) if gaps is None else gaps
    if len(gaps):
        once = gaps.groupby([*key, "next_device_ns"])["idle_after_ns"].max()
        parts.append(once.groupby(level=key).sum().rename("sync_idle_ns"))
        parts.append(gaps.groupby(key).size().rename("sync_calls"))
    compiled = text_test(df["name"], lambda s: s.str.startswith(N.COMPILED_REGION))
    if compiled.any():
        c = pd.DataFrame({"rank": rank[compiled], "step": step[compiled],
                          "n": df["name"][compiled].astype(str).str.slice(
                              len(N.COMPILED_REGION)).to_numpy()})  # fmt: skip
        parts.append(c.groupby(key)["n"].agg(lambda v: ",".join(sorted(set(v)))).rename(
            "region_names"))  # fmt: skip
        parts.append(c.groupby(key)["n"].nunique().rename("regions"))
    on_device = dev & track.isin(("gpu", "comm", "memcpy", "memset"))
    mine, end = rows_by_rank(np.flatnonzero(on_device), rank), ts + dur
    empty = np.zeros(0, dtype=np.int64)
    busy = {int(r): _Busy(ts[mine.get(int(r), empty)], end[mine.get(int(r), empty)])
            for r in distinct(rank)}  # fmt: skip
    has_device = {r for r, b in busy.items() if b.start.size}
    loader = ~dev & (dur > 0) & has(N.LOADER.pattern)
    if loader.any():
        idle = np.array([d if int(r) not in has_device else d - int(busy[int(r)].covered(
            np.array([t]), np.array([t + d]))[0]) for r, t, d in zip(rank[loader], ts[loader],
            dur[loader], strict=True)])  # fmt: skip
        parts += [_by(rank[loader], step[loader], dur[loader], "loader_ns"),
                  _by(rank[loader], step[loader], idle, "loader_idle_ns")]  # fmt: skip
    copy = (track == "memcpy") & dev
    if args is None and (track.isin(("memcpy", "comm")) | gpu).any():
        from hpcprof_kit.traces.view.args import run_args

        args = run_args(meta)  # read once, for the copies, collectives and GEMMs
    cargs = _args_by_corr(track, meta, args)
    nbytes = np.full(len(df), -1, dtype=np.int64)
    if cargs:
        nbytes[copy] = cargs.nbytes(rank[copy], corr[copy])
    kinds = copy & has(N.MEMORY_KIND.pattern)
    pageable = kinds & has(N.PAGEABLE_H2D.pattern)
    parts += [_by(rank[kinds], step[kinds], 1, "named_copies"),
              _by(rank[pageable], step[pageable], dur[pageable], "pageable_ns"),
              _by(rank[pageable], step[pageable], np.maximum(nbytes[pageable], 0),
                  "pageable_bytes")]  # fmt: skip
    parts += _d2h_bytes(rank, step, ts, dur, corr, track, has(N.D2H.pattern), dev, nbytes)
    waits = copy_waits(df, gaps) if waits is None else waits
    if len(waits):
        parts.append(waits.groupby(key)["host_wait_ns"].sum().rename("d2h_block_ns"))
    alloc = ~dev & has(N.ALLOC.pattern)
    parts += [_by(rank[alloc], step[alloc], 1, "alloc_calls"),
              _by(rank[alloc], step[alloc], dur[alloc], "alloc_ns")]  # fmt: skip
    if gpu.any():
        paced = launch_gaps(df).set_index(key)
        parts += [paced["launch_idle_ns"], paced["tiny_kernels"]]
    # no device: the aten ops are the work
    cpu_ranks = np.setdiff1d(distinct(rank), distinct(rank[dev]), assume_unique=True)
    if cpu_ranks.size:
        parts += H.tiny_op_loops(df, rank, step, ts, dur, dev, cpu_ranks, _by)
        parts += H.churned_blocks(df, rank, step, ts, dur, dev, cpu_ranks, meta, _by)
    parts += _gemms(rank, step, dur, gpu, has, ext, meta, args)
    parts += _collectives(table, meta, rank, step, dur, corr, track, dev, cargs)
    if dev.any():  # what the host did while the device idled, by cause and innermost op
        parts.append(idle_host(df).set_index(key))
    out = pd.concat(parts, axis=1) if parts else pd.DataFrame(
        index=pd.MultiIndex.from_arrays([[], []], names=key))  # fmt: skip
    out = out.reset_index()
    for col in NUMERIC:
        out[col] = (out[col] if col in out else pd.Series(0, index=out.index)).fillna(0)
        out[col] = out[col].astype(np.int64)
    for col in TEXT:
        names = out[col] if col in out else pd.Series("", index=out.index)
        out[col] = names.fillna("").astype(str)
    return out[SIGNAL_COLUMNS].sort_values(key, kind="stable").reset_index(drop=True)


class _Labels:
    """A text column as codes and their labels (a missing label as ""): ``==`` and
    :meth:`isin` test each label once and give each row its label's answer, where
    ``astype(str)``'s object array would compare Python strings one row at a time; the rules
    ask that of the track column a dozen times.

    >>> import pandas as pd
    >>> _Labels(pd.Series(["gpu", None, "cpu"], dtype="category")) == "gpu"
    array([ True, False, False])
    >>> _Labels(pd.Series(["gpu", "x"])).isin(("x", "cpu"))
    array([False,  True])
    """

    def __init__(self, column: pd.Series):
        import pandas as pd

        if isinstance(column.dtype, pd.CategoricalDtype):
            self.labels = np.array([*column.cat.categories.astype(str), ""], dtype=object)
            self.codes = column.cat.codes.to_numpy()  # code -1 (missing) takes the last slot
        else:
            codes, uniques = pd.factorize(column.astype(str))
            self.labels = np.array([*uniques, ""], dtype=object)
            self.codes = codes

    def isin(self, values) -> np.ndarray:
        hit = np.array([label in values for label in self.labels], dtype=bool)
        return hit[self.codes]

    def __eq__(self, value) -> np.ndarray:  # type: ignore[override]
        return self.isin((value,))

    __hash__ = None  # type: ignore[assignment]


class _CorrArgs:
    """(rank, correlation) -> bytes, collective name and group size of copies and
    collectives, looked up for many rows at once (the last row of a pair wins)."""

    def __init__(self, rank, corr, nbytes, coll, group):
        key = (np.asarray(rank, np.int64) << 40) | (np.asarray(corr, np.int64) & ((1 << 40) - 1))
        order = np.argsort(key, kind="stable")
        key = key[order]
        last = np.append(key[1:] != key[:-1], True) if key.size else np.zeros(0, bool)
        order = order[last]
        self.keys = key[last]
        self.bytes = np.asarray(nbytes, np.int64)[order]
        self.coll = np.asarray(coll, dtype=object)[order]
        self.group = np.asarray(group, np.int64)[order]

    def __bool__(self) -> bool:
        return bool(self.keys.size)

    def at(self, rank: np.ndarray, corr: np.ndarray) -> np.ndarray:
        """Each row's position in the table, -1 where its pair has no arguments."""
        key = (rank.astype(np.int64) << 40) | (corr.astype(np.int64) & ((1 << 40) - 1))
        pos = np.minimum(np.searchsorted(self.keys, key), max(self.keys.size - 1, 0))
        hit = (self.keys[pos] == key) & (corr >= 0) if self.keys.size else key < 0
        return np.where(hit, pos, -1)

    def nbytes(self, rank: np.ndarray, corr: np.ndarray) -> np.ndarray:
        pos = self.at(rank, corr)
        return np.where(pos >= 0, self.bytes[np.maximum(pos, 0)] if self.keys.size else -1, -1)


def _args_by_corr(track, meta, args) -> _CorrArgs:
    """The bytes, collective name and group size of copies and collectives by (rank,
    correlation)."""
    from hpcprof_kit.traces.view.args import run_args

    none = _CorrArgs([], [], [], [], [])
    needs = track.isin(("memcpy", "comm"))
    if not needs.any():
        return none
    args = run_args(meta) if args is None else args
    if args is None or args.empty:
        return none
    a = args[(args["corr"] >= 0) & (args["bytes"] >= 0)]
    return _CorrArgs(*(a[c].to_numpy() for c in ("rank", "corr", "bytes")),
                     a["coll"].astype(str).to_numpy(object), a["group"].to_numpy())  # fmt: skip


def _d2h_bytes(rank, step, ts, dur, corr, track, d2h, dev, nbytes):
    """The bytes of each device-to-host copy that is not a scalar (longer than 10 µs) whose
    runtime call ends when the copy does (the host waited for it)."""
    copy = (track == "memcpy") & dev & (dur >= SHORT_KERNEL_NS)
    copy &= d2h
    if not copy.any():
        return []
    calls = (track == "runtime") & ~dev & (corr >= 0)
    call_at = {(int(rank[i]), int(corr[i])): i for i in np.flatnonzero(calls)}
    rows, copies = [], []
    for i in np.flatnonzero(copy):
        j = call_at.get((int(rank[i]), int(corr[i])))
        if j is not None and ts[j] + dur[j] >= ts[i] + dur[i] - 1_000:
            rows.append(j)
            copies.append(i)
    if not rows:
        return []
    rows_a = np.asarray(rows)
    return [_by(rank[rows_a], step[rows_a], np.maximum(nbytes[copies], 0), "d2h_bytes")]


def copy_waits(df: pd.DataFrame, gaps: pd.DataFrame | None = None) -> pd.DataFrame:
    """The device-to-host copies the host waited for
    (:func:`~hpcprof_kit.traces.analyses.blocking_copies.blocking_copies`), in the columns of
    ``WAIT_COLUMNS``: ``named`` when the host's wait is a call ``synchronize_in_step`` reads
    (one of ``gaps``, :func:`sync_gaps`, whether or not the device idled after it on that
    rank), so one wait makes one finding."""
    import pandas as pd

    waits = blocking_copies(df)
    if waits.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("op", "call") else bool
                             if c == "named" else np.int64) for c in WAIT_COLUMNS})  # fmt: skip
    gaps = sync_gaps(df) if gaps is None else gaps
    named = np.zeros(len(waits), dtype=bool)
    if len(gaps):  # every sync call the rule reads, whether or not the device idled after it
        seen = pd.MultiIndex.from_frame(gaps[["rank", "ts_ns"]])
        named = pd.MultiIndex.from_frame(waits[["rank", "ts_ns"]]).isin(seen)
    out = waits.assign(named=named)[WAIT_COLUMNS]
    return out.astype({c: np.int64 for c in WAIT_COLUMNS if c.endswith("_ns")} | {
        "rank": np.int64, "step": np.int64, "op": str, "call": str})  # fmt: skip


def _gemms(rank, step, dur, gpu, has, ext, meta, args):
    """GEMM and convolution kernel time, and its part in fp32 without tensor cores: by the
    kernel's name or its template's ``float`` type, else (oneDNN's ``gemm_kernel``) by its
    op's recorded input types."""
    gemm = gpu & has(N.GEMM.pattern)
    if not gemm.any():
        return []
    fp32 = gemm & has(N.FP32_GEMM.pattern)
    unknown = gemm & ~fp32 & ~has(N.TENSOR_CORE_GEMM.pattern)
    # cuDNN's kernels templated on float, which no name pattern places (``dgrad_engine<float,
    # ...>``, ``wgrad_alg0_engine<float, ...>``, its Winograd kernels)
    fp32 |= unknown & has(N.FLOAT_TEMPLATE.pattern) & ~has(N.HALF_TEMPLATE.pattern)
    unknown &= ~fp32
    if unknown.any():
        from hpcprof_kit.traces.view.args import run_args

        a = run_args(meta) if args is None else args
        if a is not None and len(a):
            typed = a[(a["ext"] >= 0) & (a["input_type"] != "")]
            floats = {(int(r), int(e)) for r, e, t in zip(typed["rank"], typed["ext"],
                      typed["input_type"], strict=True) if t.split(",")[0] == "float"}  # fmt: skip
            for i in np.flatnonzero(unknown):
                fp32[i] = (int(rank[i]), int(ext[i])) in floats
    return [_by(rank[gemm], step[gemm], dur[gemm], "gemm_ns"),
            _by(rank[fp32], step[fp32], dur[fp32], "fp32_gemm_ns")]  # fmt: skip


def _collectives(table, meta, rank, step, dur, corr, track, dev, cargs):
    """Collective kernels: all, those of known size, small ones (and their time), the big
    ones' bus bytes (nccl-tests: bytes x 2(n-1)/n for an all-reduce) and time, and the time
    nothing hid of each collective, by name (``coll_exposed``: ``allreduce=ns;...``). Sizes
    come from the kernels' own arguments, else, when those hold none, from wherever the trace
    holds them (the launching ``nccl:*`` op, ``record_param_comms``), with the run's world
    size as the group."""
    import pandas as pd

    from hpcprof_kit.traces.analyses.collectives import collective_kernels

    coll = (track == "comm") & dev
    if not coll.any():
        return []
    rows = np.flatnonzero(coll)
    pos = cargs.at(rank[rows], corr[rows]) if cargs else np.full(rows.size, -1)
    nbytes = np.where(pos >= 0, cargs.bytes[np.maximum(pos, 0)], -1) if cargs else pos
    names = np.where(pos >= 0, cargs.coll[np.maximum(pos, 0)], "") if cargs else pos
    group = np.where(pos >= 0, cargs.group[np.maximum(pos, 0)], -1) if cargs else pos
    sized_here = bool((nbytes >= 0).any())
    kernels = collective_kernels(_with_meta(table, meta), sizes=not sized_here)
    if not sized_here and len(kernels) == rows.size and (kernels["bytes"] >= 0).any():
        world = max([int(m.get("world_size") or 0) for m in meta.values()], default=0) or 1
        nbytes = kernels["bytes"].to_numpy(dtype=np.int64)
        names, group = kernels["collective"].astype(str).to_numpy(object), np.full(rows.size, world)
    # the bus factor of the big ones alone: only they are read
    factor = np.ones(rows.size)
    said: dict[tuple[str, int], float] = {}  # a few collectives and group sizes: each once
    for j in np.flatnonzero(nbytes >= BIG_COLL_BYTES).tolist():
        key = (str(names[j]), int(group[j]))
        factor[j] = said[key] if key in said else said.setdefault(key, N.bus_factor(*key))
    sized, small, big = nbytes >= 0, (nbytes >= 0) & (nbytes < SMALL_COLL_BYTES), nbytes >= (
        BIG_COLL_BYTES)  # fmt: skip
    r, s, d = rank[rows], step[rows], dur[rows]
    out = [_by(r, s, 1, "colls"), _by(r[sized], s[sized], 1, "sized_colls"),
           _by(r[small], s[small], 1, "small_colls"),
           _by(r[small], s[small], d[small], "small_coll_ns"),
           _by(r[big], s[big], (nbytes[big] * factor[big]).astype(np.int64),
               "big_coll_busbytes"), _by(r[big], s[big], d[big], "big_coll_ns")]  # fmt: skip
    exposed = kernels[kernels["exposed_ns"] > 0]
    if len(exposed):
        by = exposed.groupby(["rank", "step", "collective"])["exposed_ns"].sum()
        text: dict[tuple[int, int], list[str]] = {}
        for (r_, s_, c), ns in zip(by.index.tolist(), by.tolist(), strict=True):
            text.setdefault((r_, s_), []).append(f"{c}={int(ns)}")
        index = pd.MultiIndex.from_tuples(list(text), names=["rank", "step"])
        out.append(pd.Series([";".join(v) for v in text.values()], index=index,
                             name="coll_exposed"))  # fmt: skip
    return out


def exposed_by_collective(texts) -> dict[str, int]:
    """The ``coll_exposed`` texts of some ranks and steps, added up: collective -> ns ("" for
    a collective neither its host op nor its kernel names).

    >>> exposed_by_collective(["allreduce=5;alltoall=2", "allreduce=1", ""])
    {'allreduce': 6, 'alltoall': 2}
    """
    out: dict[str, int] = {}
    for text in texts:
        for part in str(text).split(";") if text else ():
            name, _, ns = part.rpartition("=")
            out[name] = out.get(name, 0) + int(ns)
    return out


def _with_meta(df: pd.DataFrame, meta: dict) -> pd.DataFrame:
    """``df`` over the same columns with ``meta`` as its ranks' metadata (the files the
    analyses read arguments from)."""
    import pandas as pd

    out = pd.DataFrame(df, copy=False)
    out.attrs = {"ranks": meta}
    return out


def sync_gaps(df: pd.DataFrame) -> pd.DataFrame:
    """Each host call inside a step that waits for the device (``SYNC_NAMES``), with the time
    the device then sits idle until its next event (``idle_after_ns``). A call counts only
    when the device still had work as the call began (the host really waited): a call on a
    drained device costs nothing, the idle before it was the host's doing. Columns ``rank,
    step, name, ts_ns, dur_ns, idle_after_ns, next_device_ns``; nested calls (``aten::item`` around
    ``cudaStreamSynchronize``) end before the same device event, and only the longest of them
    counts the gap."""
    import pandas as pd

    df = bare(df)
    rows = text_test(df["name"], lambda s: s.str.contains(N.SYNC_NAMES, regex=True))
    rows &= (df["step"].to_numpy() >= 0) & (df["device"].to_numpy() < 0)
    rows &= ~_scalar_of_host_tensor(df, rows)
    rows &= ~_copy_to_host(df, rows)
    sync = df[rows]
    cols = ["rank", "step", "name", "ts_ns", "dur_ns", "idle_after_ns", "next_device_ns"]
    if sync.empty:
        return pd.DataFrame([], columns=cols)
    on_device = text_test(df["track"], lambda s: s.isin(("gpu", "comm", "memcpy", "memset")))
    on_device &= df["device"].to_numpy() >= 0
    dev = df[on_device]
    idle = np.zeros(len(sync), dtype=np.int64)
    following = np.full(len(sync), -1, dtype=np.int64)
    begins = sync["ts_ns"].to_numpy(dtype=np.int64)
    ends = begins + sync["dur_ns"].to_numpy(dtype=np.int64)
    for rank in np.unique(sync["rank"].to_numpy()):
        mine = sync["rank"].to_numpy() == rank
        d = dev[dev["rank"].to_numpy() == rank]
        if d.empty:
            continue
        order = np.argsort(d["ts_ns"].to_numpy(), kind="stable")
        start = d["ts_ns"].to_numpy(dtype=np.int64)[order]
        busy_until = np.maximum.accumulate((d["ts_ns"] + d["dur_ns"]).to_numpy(np.int64)[order])
        at = np.searchsorted(start, ends[mine], side="right")
        covered = (at > 0) & (busy_until[np.maximum(at - 1, 0)] > ends[mine])
        began = np.searchsorted(start, begins[mine], side="right")
        # the device still had work, or had just run out of it, as the host began to wait
        waited = (began > 0) & (busy_until[np.maximum(began - 1, 0)] > begins[mine] - DRAINED_NS)
        nxt = np.where(at < start.size, start[np.minimum(at, start.size - 1)], ends[mine])
        idle[mine] = np.where(covered | ~waited, 0, np.maximum(nxt - ends[mine], 0))
        following[mine] = nxt
    return pd.DataFrame(
        {
            "rank": sync["rank"].to_numpy(dtype=np.int64),
            "step": sync["step"].to_numpy(dtype=np.int64),
            "name": sync["name"].astype(str).to_numpy(),
            "ts_ns": begins,
            "dur_ns": sync["dur_ns"].to_numpy(dtype=np.int64),
            "idle_after_ns": idle,
            "next_device_ns": following,
        }
    )


def _copy_to_host(df: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` are synchronous copies (``cudaMemcpy``) of device memory to the host:
    the host's wait in them is a blocking copy's (:func:`copy_waits`, the ``sync_copy``
    rule's), not a sync's; a synchronous copy to the device still counts as a sync."""
    calls = rows & text_test(df["name"], lambda s: s.str.contains(N.SYNC_COPY_CALLS))
    out = np.zeros(len(df), dtype=bool)
    if not calls.any():
        return out
    copies = text_test(df["track"], lambda s: s == "memcpy") & (df["device"].to_numpy() >= 0)
    copies &= text_test(df["name"], lambda s: s.str.contains(D2H))
    rank = df["rank"].to_numpy(dtype=np.int64)
    corr = df["corr"].to_numpy(dtype=np.int64)
    key = (rank << 40) | corr
    out[calls] = np.isin(key[calls], key[copies]) & (corr[calls] >= 0)
    return out


def _scalar_of_host_tensor(df: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` read a scalar of a host tensor: ``aten::_local_scalar_dense`` (what
    ``.item()`` runs) with no runtime call inside it on its thread. A device tensor's scalar
    is copied and waited for by runtime calls (``cudaMemcpyAsync``, ``cudaStreamSynchronize``)
    within it; a CPU tensor's (an optimizer's step counter) waits for nothing."""
    scalar = rows & text_test(df["name"], lambda s: s == "aten::_local_scalar_dense")
    out = np.zeros(len(df), dtype=bool)
    if not scalar.any():
        return out
    runtime = text_test(df["track"], lambda s: s == "runtime")
    rank = df["rank"].to_numpy(dtype=np.int64)
    tid = df["tid"].cat.codes.to_numpy() if hasattr(df["tid"], "cat") else df["tid"].to_numpy()
    ts = df["ts_ns"].to_numpy(dtype=np.int64)
    end = ts + df["dur_ns"].to_numpy(dtype=np.int64)
    thread = rank * (int(tid.max(initial=0)) + 2) + tid + 1  # one number per (rank, thread)
    calls = np.flatnonzero(runtime)
    calls = calls[np.lexsort((ts[calls], thread[calls]))]  # by thread, then start
    keys, starts = thread[calls], ts[calls]
    for i in np.flatnonzero(scalar):
        mine = starts[np.searchsorted(keys, thread[i]) : np.searchsorted(keys, thread[i], "right")]
        out[i] = np.searchsorted(mine, ts[i]) == np.searchsorted(mine, end[i], "right")
    return out


def kernel_rows(df: pd.DataFrame) -> np.ndarray:
    """Rows of device kernels, compute and communication, with a duration."""
    from hpcprof_kit.traces.analyses.ops import KERNEL_TRACKS  # what top_kernels counts as a kernel

    rows = text_test(df["track"], lambda s: s.isin(KERNEL_TRACKS))
    return rows & (df["device"].to_numpy() >= 0) & (df["dur_ns"].to_numpy() > 0)
