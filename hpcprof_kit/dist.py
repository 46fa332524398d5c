"""Rendezvous, backend choice, process-group init and teardown, for the ranks a launcher started.

Who each process is comes from :mod:`hpcprof_kit.ranks` (re-exported here:
``hpcprof_kit.dist.ranks_from_env``); :func:`distributed` turns it into an initialised process
group and always tears it down again.

>>> info = ranks_from_env({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1",
...                        "MPI_LOCALNRANKS": "2"})
>>> (info.rank, info.local_rank, info.world_size, info.nodes, info.source)
(1, 1, 2, 1, 'Hydra/PMI')
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hpcprof_kit.errors import DistError
from hpcprof_kit.ranks import (  # noqa: F401  (re-exported: the documented dist contract)
    LOCAL_RANK_VARS,
    LOCAL_SIZE_VARS,
    NODE_COUNT_VARS,
    RANK_VARS,
    WORLD_SIZE_VARS,
    RankInfo,
    ranks_from_env,
)

# Backend by device type; "ccl" is the oneCCL-bindings fallback on older XPU stacks.
BACKEND_FOR_DEVICE: dict[str, str] = {"xpu": "xccl", "cuda": "nccl", "mps": "gloo", "cpu": "gloo"}
KNOWN_BACKENDS: tuple[str, ...] = ("gloo", "nccl", "xccl", "ccl", "mpi")
SETTLE_S = 0.2  # after the closing barrier, GIL released: the backend's threads finish up


@dataclass(frozen=True)
class DistInfo:
    """What :func:`distributed` set up: ranks, device, backend and this rank's host."""

    rank: int
    local_rank: int
    world_size: int
    nodes: int
    device: str
    backend: str
    host: str

    def banner(self) -> str:
        """The one line each rank prints at start (notebook 03 and the tests parse it)."""
        return (
            f"rank={self.rank} local_rank={self.local_rank} world={self.world_size} "
            f"nodes={self.nodes} device={self.device} backend={self.backend} host={self.host}"
        )


BANNER_FIELDS: tuple[str, ...] = (
    "rank",
    "local_rank",
    "world",
    "nodes",
    "device",
    "backend",
    "host",
)


def parse_banners(text: str) -> list[dict[str, str | int]]:
    """Each rank's banner line found in ``text`` (a job's stdout), sorted by rank.

    >>> parse_banners("noise\\nrank=1 local_rank=1 world=2 nodes=1 device=cpu backend=gloo host=n1\\n")
    [{'rank': 1, 'local_rank': 1, 'world': 2, 'nodes': 1, 'device': 'cpu', 'backend': 'gloo', 'host': 'n1'}]
    """
    rows = []
    for line in text.splitlines():
        parts = dict(p.split("=", 1) for p in line.split() if "=" in p)
        if list(parts) == list(BANNER_FIELDS):
            rows.append({k: int(v) if v.isdigit() else v for k, v in parts.items()})
    return sorted(rows, key=lambda r: r["rank"])


def choose_backend(device_type: str, requested: str | None = None) -> str:
    """The collective backend for a device type, or the requested one when it is built here.

    >>> choose_backend("cpu")
    'gloo'
    """
    import torch.distributed as tdist

    if requested:
        if requested not in KNOWN_BACKENDS:
            raise DistError(
                f"backend {requested!r} is unknown (known: {', '.join(KNOWN_BACKENDS)}); "
                f"leave it out to use {BACKEND_FOR_DEVICE.get(device_type, 'gloo')!r} on "
                f"{device_type}"
            )
        if not tdist.is_backend_available(requested):
            raise DistError(
                f"backend {requested!r} is not built into this PyTorch "
                f"(torch.distributed.is_backend_available({requested!r}) is False); leave it "
                f"out to use {BACKEND_FOR_DEVICE.get(device_type, 'gloo')!r}, or load a "
                "PyTorch built with it"
            )
        return requested
    backend = BACKEND_FOR_DEVICE.get(device_type, "gloo")
    if backend == "xccl" and not tdist.is_backend_available("xccl"):
        try:  # older Aurora stacks: oneCCL bindings register the "ccl" backend on import
            import oneccl_bindings_for_pytorch  # noqa: F401
        except ImportError:
            raise DistError(
                "neither xccl (torch.distributed.is_backend_available('xccl') is False) nor "
                "oneccl_bindings_for_pytorch is available for XPU; load the frameworks module "
                "(torch with xccl) or pass backend='gloo' to run collectives on the CPU"
            ) from None
        return "ccl"
    return backend


def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def _mpi_comm():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise DistError(
            f"several ranks need MPI to share the rendezvous address, but mpi4py cannot be "
            f"imported ({exc}); install mpi4py built against the site MPI"
        ) from None
    return MPI.COMM_WORLD


def _rendezvous(ranks: RankInfo, host: str, hsn_suffix: str) -> tuple[str, str, int]:
    """(MASTER_ADDR, MASTER_PORT, nodes): rank 0's address and port, shared over MPI."""
    if ranks.world_size == 1:
        return "127.0.0.1", str(free_port()), 1
    comm = _mpi_comm()
    try:
        if comm.Get_size() != ranks.world_size:
            raise DistError(
                f"the launcher says world size {ranks.world_size} ({ranks.source}) but MPI "
                f"says {comm.Get_size()}; unset stale rank variables, or use mpi4py built "
                "against the MPI that started the job"
                + (
                    " (under srun, pass --mpi=pmi2 or --mpi=pmix)"
                    if "Slurm" in ranks.source
                    else ""
                )
            )
        hosts = comm.allgather(host)
        mine = (host + hsn_suffix, str(free_port())) if ranks.rank == 0 else None
        addr, port = comm.bcast(mine, root=0)
    except DistError:
        raise
    except Exception as exc:  # an MPI that cannot reach the launcher fails here, not in torch
        raise DistError(
            f"MPI could not broadcast the rendezvous address ({type(exc).__name__}: {exc}); "
            "mpi4py must be built against the site MPI (e.g. Cray MPICH under PALS)"
        ) from None
    return addr, port, len(set(hosts))


@contextmanager
def distributed(
    backend: str | None = None, timeout_s: float = 300.0, device: str | None = None
) -> Iterator[DistInfo]:
    """Initialise torch.distributed for this rank, yield a :class:`DistInfo`, always tear down.

    The local device is set before ``init_process_group``; ``MASTER_ADDR``/``MASTER_PORT``
    are restored to what they were afterwards, even on error.

    On a normal exit every rank settles the group before ``destroy_process_group()``
    (:func:`_settle`). Building DDP (or calling ``torch.compile``) inside the block?
    ``import torch._dynamo`` before entering it: DDP imports it on first use, and imported
    while a group is live, torch's compiler stack keeps references that stop
    ``destroy_process_group()`` from freeing the group, so gloo's threads live on into the
    interpreter's exit, where one still freeing a work aborted the rank now and then
    ("terminate called without an active exception", exit status 6 under mpiexec) after
    all its work was done. The train app does this.

    >>> with distributed() as info:          # a single process needs no MPI
    ...     print(info.world_size, info.backend)
    1 gloo
    """
    from datetime import timedelta

    import torch.distributed as tdist

    from hpcprof_kit import device as devmod
    from hpcprof_kit.systems import detect_system, load_system

    ranks = ranks_from_env()
    kind = devmod.detect(device)
    local = devmod.local_device(ranks.local_rank, kind)
    chosen = choose_backend(kind, backend)
    host = socket.gethostname()
    saved = {k: os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT")}
    if ranks.source.startswith("torchrun") and all(saved.values()):
        addr, port, nodes = str(saved["MASTER_ADDR"]), str(saved["MASTER_PORT"]), ranks.nodes
    else:
        suffix = load_system(detect_system()).hsn_suffix
        addr, port, mpi_nodes = _rendezvous(ranks, host, suffix)
        nodes = max(mpi_nodes, ranks.nodes) if ranks.world_size > 1 else 1
    try:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = addr, port
        devmod.set_current(local)  # before init: a collective must not land on device 0
        kwargs = {"device_id": local} if local.type != "cpu" else {}
        tdist.init_process_group(
            backend=chosen,
            rank=ranks.rank,
            world_size=ranks.world_size,
            timeout=timedelta(seconds=timeout_s),
            **kwargs,
        )
        yield DistInfo(
            ranks.rank, ranks.local_rank, ranks.world_size, nodes, str(local), chosen, host
        )
        _settle(tdist)
    finally:
        if tdist.is_initialized():
            tdist.destroy_process_group()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _settle(tdist: Any) -> None:
    """Let the backend's worker threads finish their last work before the group goes.

    A gloo worker thread frees each finished work after the caller already has its result,
    and that can need the GIL (work enqueued while torch's profiler ran holds Python
    state). Torn down from Python, which holds the GIL while it joins the thread, the two
    then waited on each other for ever; at interpreter exit the rank aborted instead. A
    barrier, then a short sleep with the GIL released, lets the threads finish first.
    """
    tdist.barrier()
    time.sleep(SETTLE_S)


__all__ = [
    "BACKEND_FOR_DEVICE", "DistInfo", "RankInfo", "choose_backend", "distributed",
    "free_port", "parse_banners", "ranks_from_env",
]  # fmt: skip
