"""Each collective kernel with the collective it runs, its message size and the time nothing
hid it, read wherever the trace holds them.

A collective kernel's name does not always say which collective it runs: NCCL runs an
all-to-all, and in older versions an all-reduce too, as ``ncclKernel_SendRecv_...``. The host
op that launched it does: the kernel's launch call (same correlation id) lies inside
``nccl:all_to_all``, ``record_param_comms`` or ``c10d::allreduce_`` on its thread. Their
arguments hold the size: ``record_param_comms``' ``In msg nelems`` and ``dtype``, or, in
older traces, the ``nccl:*`` op's first ``Input Dims`` and ``Input type``
(:func:`~hpcprof_kit.traces.table.event_args.event_args`). The kernel's own arguments, where
the trace writes them there, come first.

Collective names are written as NCCL's tests write them, without underscores: ``allreduce``,
``alltoall``, ``allgather``, ``reducescatter``, ``broadcast``, ``sendrecv``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.analyses import intervals as iv
from hpcprof_kit.traces.analyses.breakdown import bare, text_test
from hpcprof_kit.traces.analyses.launch_pacing import event_times, launches_of

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# host ops that name a collective: the process group's and torch.distributed's own
HOST_COLLECTIVE = re.compile(r"^(?:nccl|rccl|xccl|gloo):|^record_param_comms$|^c10d::")
# a collective's name in a host op's or a kernel's name -> NCCL's tests' spelling
_NAMES = (("alltoall", r"all_?to_?all"), ("allreduce", r"all_?reduce"),
          ("reducescatter", r"reduce_?scatter"), ("allgather", r"all_?gather"),
          ("broadcast", r"broadcast"), ("sendrecv", r"send_?recv|\bsend|\brecv"),
          ("reduce", r"reduce"), ("barrier", r"barrier"))  # fmt: skip
COLUMNS = ["rank", "step", "collective", "bytes", "ts_ns", "dur_ns", "exposed_ns"]


def collective_of(name: str) -> str:
    """The collective a host op's or a kernel's name says, "" when none.

    >>> collective_of("nccl:all_to_all"), collective_of("c10d::_allgather_base_")
    ('alltoall', 'allgather')
    >>> collective_of("allgatherbase"), collective_of("record_param_comms")
    ('allgather', '')
    >>> collective_of("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*)")
    'reducescatter'
    """
    for label, pattern in _NAMES:
        if re.search(pattern, name, re.IGNORECASE):
            return label
    return ""


def collective_kernels(table: pd.DataFrame, sizes: bool = True) -> pd.DataFrame:
    """One row per collective kernel on a device: its rank and step, the collective
    (``collective``: from the host op that launched it, else the kernel's name), its
    message bytes (``bytes``, -1 when the trace holds none), start, duration and the part
    of it no compute kernel of its rank overlapped (``exposed_ns``). ``table`` as
    ``load`` gave it: its metadata names the files the sizes are read from; without
    ``sizes`` they are not read (every ``bytes`` -1) and the collectives are named by the
    host ops' and kernels' names alone."""
    import pandas as pd

    df = bare(table)
    device = df["device"].to_numpy(dtype=np.int64)
    kernels = np.flatnonzero(text_test(df["track"], lambda s: s == "comm") & (device >= 0))
    if not kernels.size:
        return pd.DataFrame(columns=COLUMNS)
    t = event_times(df)
    rank, ts, end, corr, step, runtime = (t[k] for k in ("rank", "ts", "end", "corr", "step",
                                                         "runtime"))  # fmt: skip
    host = device < 0
    launch = launches_of(kernels, runtime, rank, corr)
    ops = np.flatnonzero(host & text_test(df["name"], lambda s: s.str.contains(HOST_COLLECTIVE)))
    sized = _sizes(table) if sizes else {}
    # each kernel named by its own name first (one test per distinct name), then by the host
    # ops around its launch, where its thread has any
    label = _names_of(df["name"], kernels)
    nbytes = np.array([sized.get(k, ("", -1))[1] for k in kernels.tolist()], dtype=np.int64)
    if ops.size:
        tid = df["tid"]
        threads: dict[tuple[int, str], list[int]] = {}
        for o in ops.tolist():
            threads.setdefault((int(rank[o]), str(tid.iat[o])), []).append(o)
        by_thread = {key: np.asarray(rows, dtype=np.int64) for key, rows in threads.items()}
        op_label = dict(zip(ops.tolist(), _names_of(df["name"], ops), strict=True))
        for i, (k, at) in enumerate(zip(kernels.tolist(), launch.tolist(), strict=True)):
            mine = by_thread.get((int(rank[k]), str(tid.iat[at])), ops[:0]) if at >= 0 else ops[:0]
            if not mine.size:
                continue
            around = mine[(ts[mine] <= ts[at]) & (end[mine] >= end[at])]
            around = around[np.argsort(end[around] - ts[around])].tolist()  # innermost first
            named = next((c for c in (sized.get(o, ("", -1))[0] or op_label[o]
                                      for o in around) if c), "")  # fmt: skip
            label[i] = named or label[i]
            if nbytes[i] < 0:
                nbytes[i] = next((sized[o][1] for o in around if sized.get(o, ("", -1))[1]
                                  >= 0), -1)  # fmt: skip
    columns = (rank[kernels], step[kernels], np.asarray(label, dtype=object), nbytes,
               ts[kernels], end[kernels] - ts[kernels])  # fmt: skip
    frame = pd.DataFrame(dict(zip(COLUMNS[:-1], columns, strict=True)))
    frame["exposed_ns"] = _exposed(df, frame, rank, ts, end, device)
    return frame


def _names_of(names: pd.Series, rows: np.ndarray) -> list[str]:
    """:func:`collective_of` of each of ``rows``' names, worked once per distinct name."""
    text = names.iloc[rows].astype(str).to_numpy()
    unique, inverse = np.unique(text, return_inverse=True)
    said = [collective_of(n) for n in unique.tolist()]
    return [said[i] for i in inverse.tolist()]


def _sizes(df: pd.DataFrame) -> dict[int, tuple[str, int]]:
    """Row position -> (collective, bytes) of the host collective ops and the collective
    kernels whose arguments the trace files hold (bytes -1 where unknown)."""
    from hpcprof_kit.traces.table.event_args import event_args

    if not df.attrs.get("ranks"):
        return {}
    try:
        args = event_args(df, kinds=["collectives"])
    except Exception:  # noqa: BLE001 - files moved or a table built in memory: no sizes
        return {}
    if args is None or not len(args):
        return {}
    at = df.index.get_indexer(args.index)
    coll = args["collective"].fillna("").astype(str).map(collective_of)
    nbytes = args["bytes"].fillna(-1).astype(np.int64)
    return {int(p): (c, int(b)) for p, c, b in zip(at, coll, nbytes, strict=True) if p >= 0}


def _exposed(df, frame, rank, ts, end, device) -> np.ndarray:
    """Each collective kernel's time that no compute kernel of its rank overlapped: every
    rank in a block of time of its own, so one union and one measure serve them all."""
    compute = np.flatnonzero(text_test(df["track"], lambda s: s == "gpu") & (device >= 0))
    mine_rank = frame["rank"].to_numpy(dtype=np.int64)
    start = frame["ts_ns"].to_numpy(dtype=np.int64)
    stop = start + frame["dur_ns"].to_numpy(dtype=np.int64)
    if not compute.size or not start.size:
        return stop - start
    ranks = np.unique(np.concatenate([rank[compute], mine_rank]))
    base = min(int(ts[compute].min()), int(start.min()))
    span = max(int(end[compute].max()), int(stop.max())) - base + 1
    shift = np.searchsorted(ranks, rank[compute]) * span - base
    own = np.searchsorted(ranks, mine_rank) * span - base
    s, e = iv.union(ts[compute] + shift, end[compute] + shift)
    return (stop - start) - iv.measure_each(s, e, start + own, stop + own)
