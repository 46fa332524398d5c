"""HTA's temporal breakdown and comm/compute overlap, computed on the kit's trace table.

The kit's own analyses (:func:`~hpcprof_kit.traces.analyses.breakdown.step_breakdown`,
:func:`~hpcprof_kit.traces.analyses.breakdown.comm_overlap`) answer "where did each step go" with
their own window (the ``ProfilerStep`` spans) and their own classes (the ``track`` column).
HolisticTraceAnalysis (HTA) 0.5.0 answers similar questions with other definitions. This
module follows HTA's definitions exactly, so the two tools can be checked against each other
on the same trace (``tests/test_hta_crosscheck.py``, ``docs/hta-crosscheck.md``):

- **events**: per rank, the rows with a GPU stream (``stream != -1``): kernels, memcpy,
  memset (``TraceAnalysis`` keeps ``Trace`` spans and instants out; neither has a stream).
- **window** (``Trace._filter_irrelevant_gpu_kernels``, ``include_last_profiler_step=False``):
  when the loaded ranks name two or more distinct ``ProfilerStep`` events, a rank keeps only
  the device events whose correlation id matches a host event that starts before the rank's
  last ``ProfilerStep`` starts: the last step, and whatever was launched after it, is dropped.
  With fewer step names every device event counts.
- **kernel classes** (``hta.utils.utils.get_kernel_type``, by name, first match wins):
  communication ``^nccl.*Kernel``, memory ``^(Memcpy|Memset|dma)``, other (names HTA's
  ``is_compute_kernel`` rejects: ``.*Memcpy``, ``^Memset``, ``.*Sync``), else computation.
- **temporal breakdown** (``BreakdownAnalysis.get_temporal_breakdown``): ``kernel_time`` from
  the first device event's start to the last one's end; ``idle`` the part of it no device
  event covers; ``compute`` the union of computation kernels; ``non_compute`` the rest.
- **overlap** (``CommunicationAnalysis.get_comm_comp_overlap``): the time communication and
  computation kernels run at once, over the union of communication kernels; HTA reports it
  as a percentage rounded to two decimals.
- **microseconds** (``trace_parser.round_down_time_stamps``): HTA reads ``ts`` and ``dur`` as
  float64 µs and, for a file whose timestamps are not whole µs, rounds each event's start up
  and its end down to a whole µs. ``microseconds=True`` does the same, float64 included (at
  epoch-sized timestamps a float64 resolves 0.25 µs, which moves some events by a µs), so
  the figures are HTA's to the µs; the default keeps the kit's exact nanoseconds.

Every figure is in µs, under HTA's column names.

>>> from hpcprof_kit.traces import load, hta_compat              # doctest: +SKIP
>>> hta_compat.temporal_breakdown(load("runs/x/traces"))         # doctest: +SKIP
>>> hta_compat.comm_comp_overlap(load("runs/x/traces"))          # doctest: +SKIP
>>> kernel_class("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)")
'COMMUNICATION'
>>> kernel_class("Memcpy DtoD (Device -> Device)"), kernel_class("sm80_gemm")
('MEMORY', 'COMPUTATION')
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces.analyses import intervals as iv
from hpcprof_kit.traces.table.distinct import distinct

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

HTA_VERSION = "0.5.0"
# (class, pattern matched at the start of the kernel name); first match wins, else COMPUTATION
KERNEL_CLASSES: list[tuple[str, str]] = [
    ("COMMUNICATION", r"nccl.*Kernel"),
    ("MEMORY", r"(Memcpy)|(Memset)|(dma)"),
    ("OTHER", r"(nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)"),  # HTA's "not compute" test
]
DEFAULT_CLASS = "COMPUTATION"
STEP_MARK = "ProfilerStep"  # HTA: any name containing it is a step
SYNC_NAMES = ("Event Sync", "Context Sync")  # device-side syncs HTA counts as GPU events
BREAKDOWN_COLUMNS = [
    "rank",
    "idle_time(us)",
    "compute_time(us)",
    "non_compute_time(us)",
    "kernel_time(us)",
    "idle_time_pctg",
    "compute_time_pctg",
    "non_compute_time_pctg",
]


def kernel_class(name: str) -> str:
    """HTA's class of a device event by its name: COMMUNICATION, MEMORY, COMPUTATION, OTHER.

    >>> kernel_class("cudaStreamSync"), kernel_class("Memset (Device)")
    ('OTHER', 'MEMORY')
    """
    return next((c for c, rx in KERNEL_CLASSES if re.match(rx, name)), DEFAULT_CLASS)


def _per_label(column: pd.Series, test) -> tuple[np.ndarray, np.ndarray]:
    """``test`` (label -> value) of every row, computed once per distinct label; and the rows'
    label codes (-1 for a missing value, whose result is ``test("")``)."""
    cat = column.astype("category")
    values = [test(str(label)) for label in cat.cat.categories] + [test("")]
    codes = cat.cat.codes.to_numpy()
    return np.array(values)[codes], codes


def _classes(names: pd.Series) -> np.ndarray:
    """:func:`kernel_class` of every row."""
    return _per_label(names, kernel_class)[0]


def _times(df: pd.DataFrame, microseconds: bool) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every row in ns: exact, or rounded as HTA rounds a rank whose
    timestamps are not whole µs."""
    ts = df["ts_ns"].to_numpy(dtype=np.int64)
    end = ts + df["dur_ns"].to_numpy(dtype=np.int64)
    if not microseconds:
        return ts, end
    rank = df["rank"].to_numpy()
    rounded = np.isin(rank, distinct(rank[ts % 1000 != 0]))
    # float64 µs as json.loads reads "whole.frac" (whole + frac/1000 rounds the same way)
    ts_us = (ts // 1000).astype(np.float64) + (ts % 1000) / 1000
    end_us = ts_us + (end - ts) / 1000
    # whole µs below 2**53 are exact in float64, so the casts lose nothing
    start = np.where(rounded, np.ceil(ts_us).astype(np.int64) * 1000, ts)
    return start, np.where(rounded, np.floor(end_us).astype(np.int64) * 1000, end)


def _device_rows(df: pd.DataFrame, start: np.ndarray) -> np.ndarray:
    """Boolean mask of the device events HTA analyses, after its last-step filter."""
    stream = df["stream"].to_numpy()
    corr = df["corr"].to_numpy().astype(np.int64)
    is_sync = _per_label(df["name"], lambda s: s in SYNC_NAMES)[0]
    device = ((stream >= 0) & (corr >= 0)) | is_sync
    is_step, codes = _per_label(df["name"], lambda s: STEP_MARK in s)
    if np.unique(codes[is_step]).size < 2:  # distinct step names in the loaded ranks
        return stream != -1
    # HTA drops instants (no dur) and Trace spans while parsing
    host = ~device & (df["track"] != "instant").to_numpy() & (df["cat"] != "Trace").to_numpy()
    rank = df["rank"].to_numpy().astype(np.int64)
    ranks = distinct(rank)
    cutoff = np.full(ranks.size, np.iinfo(np.int64).min)  # a rank without steps keeps none
    steps = host & is_step
    np.maximum.at(cutoff, np.searchsorted(ranks, rank[steps]), start[steps])
    cutoff = cutoff[np.searchsorted(ranks, rank)]
    early = host & (start < cutoff)
    key = (rank << 40) | (corr & ((1 << 40) - 1))  # (rank, correlation id) as one number
    # membership by binary search in the few early keys: np.isin would sort the whole table
    early_keys = distinct(key[early & (corr >= 0)])
    launched = np.zeros_like(device)
    if early_keys.size:  # only device rows are asked: the rest are never launched
        rows = np.flatnonzero(device)
        at = np.minimum(np.searchsorted(early_keys, key[rows]), early_keys.size - 1)
        launched[rows] = early_keys[at] == key[rows]
    return (launched | early) & (stream != -1)


def _events(df: pd.DataFrame, microseconds: bool) -> pd.DataFrame:
    """Per device event in HTA's window: ``rank, start, end, kind`` (times in ns)."""
    import pandas as pd

    missing = [c for c in ("rank", "name", "ts_ns", "dur_ns", "stream", "corr") if c not in df]
    if missing:
        raise TraceFormatError(
            f"expected a trace table, but columns {missing} are missing; build it with "
            "hpcprof_kit.traces.load(path)"
        )
    start, end = _times(df, microseconds)
    rows = _device_rows(df, start)
    out = pd.DataFrame(
        {
            "rank": df["rank"].to_numpy()[rows],
            "start": start[rows],
            "end": end[rows],
            "kind": _classes(df["name"][rows]),
        }
    )
    ranks = sorted(int(r) for r in distinct(df["rank"]))
    empty = [r for r in ranks if r not in set(out["rank"].tolist())]
    if empty:
        raise TraceFormatError(
            f"rank(s) {empty} have no GPU events in HTA's window (HTA {HTA_VERSION} fails on "
            "them); load a trace recorded with ProfilerActivity.CUDA"
        )
    return out


def _busy(ev: pd.DataFrame, kind: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    sel = ev if kind is None else ev[ev["kind"] == kind]
    return iv.union(sel["start"].to_numpy(), sel["end"].to_numpy())


def _length(spans: tuple[np.ndarray, np.ndarray]) -> int:
    return int((spans[1] - spans[0]).sum())


def temporal_breakdown(df: pd.DataFrame, *, microseconds: bool = False) -> pd.DataFrame:
    """Per rank, HTA's ``get_temporal_breakdown()``: idle, compute and non-compute time (µs)
    between the first and the last device event of HTA's window, and their shares (%).

    ``microseconds=True`` rounds event times as HTA does (see the module docstring).

    >>> from hpcprof_kit.traces import load                       # doctest: +SKIP
    >>> temporal_breakdown(load("cuda_rank*_of_128.json.gz"))     # doctest: +SKIP
    """
    import pandas as pd

    rows = []
    for rank, ev in _events(df, microseconds).groupby("rank", sort=True):
        window = int(ev["end"].max() - ev["start"].min())
        busy = _length(_busy(ev))
        compute = _length(_busy(ev, "COMPUTATION"))
        rows.append([int(rank), window - busy, compute, busy - compute, window])
    ns = np.array(rows, dtype=np.int64).reshape(-1, 5)
    out = pd.DataFrame({"rank": ns[:, 0]})
    for i, col in enumerate(BREAKDOWN_COLUMNS[1:5], start=1):
        out[col] = ns[:, i] / 1000
    for part in ("idle_time", "compute_time", "non_compute_time"):
        out[f"{part}_pctg"] = (
            100 * ns[:, BREAKDOWN_COLUMNS.index(f"{part}(us)")] / ns[:, 4]
        ).round(2)
    return out[BREAKDOWN_COLUMNS]


def comm_comp_overlap(df: pd.DataFrame, *, microseconds: bool = False) -> pd.DataFrame:
    """Per rank, HTA's ``get_comm_comp_overlap()``: the share of communication-kernel time
    during which computation kernels run too.

    Columns: ``rank``, ``comm_time(us)``, ``overlap_time(us)``, ``comp_comm_overlap_ratio``
    (NaN for a rank without communication) and ``comp_comm_overlap_pctg`` (the ratio in %,
    rounded to two decimals: HTA's only column besides ``rank``).

    >>> from hpcprof_kit.traces import load                       # doctest: +SKIP
    >>> comm_comp_overlap(load("cuda_rank*_of_128.json.gz"))      # doctest: +SKIP
    """
    import pandas as pd

    rows = []
    for rank, ev in _events(df, microseconds).groupby("rank", sort=True):
        comm, comp = _busy(ev, "COMMUNICATION"), _busy(ev, "COMPUTATION")
        both = _length(comm) + _length(comp) - _length(iv.union_of(comm, comp))
        rows.append((int(rank), _length(comm), both))
    rank, comm, both = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(comm > 0, both / np.where(comm > 0, comm, 1), np.nan)
    return pd.DataFrame(
        {
            "rank": rank,
            "comm_time(us)": comm / 1000,
            "overlap_time(us)": both / 1000,
            "comp_comm_overlap_ratio": ratio,
            "comp_comm_overlap_pctg": np.round(100 * ratio, 2),
        }
    )
