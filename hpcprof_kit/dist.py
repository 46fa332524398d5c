"""Backend choice, process-group init and teardown, for the ranks a launcher started; the
rendezvous itself is :mod:`hpcprof_kit.rendezvous`.

Who each process is comes from :mod:`hpcprof_kit.ranks` (``ranks_from_env``); :func:`distributed`
turns it into an initialised process group and tears it down again, or joins the group a script
already made and leaves it up.

>>> from hpcprof_kit.ranks import ranks_from_env
>>> info = ranks_from_env({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1",
...                        "MPI_LOCALNRANKS": "2"})
>>> (info.rank, info.local_rank, info.world_size, info.nodes, info.source)
(1, 1, 2, 1, 'Hydra/PMI')
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from hpcprof_kit.errors import DistError
from hpcprof_kit.ranks import ranks_from_env
from hpcprof_kit.rendezvous import _rendezvous, connect_store

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
    """Each rank's banner line found in ``text`` (a job's stdout), sorted by rank, whatever
    the launcher put around it: a label (PALS's and ``srun --label``'s ``0: ``, Hydra ``-l``'s
    ``[0] ``), or another rank's banner on the same line (two ranks writing at once).

    >>> parse_banners("noise\\nrank=1 local_rank=1 world=2 nodes=1 device=cpu backend=gloo host=n1\\n")
    [{'rank': 1, 'local_rank': 1, 'world': 2, 'nodes': 1, 'device': 'cpu', 'backend': 'gloo', 'host': 'n1'}]
    >>> glued = ("0: rank=0 local_rank=0 world=2 nodes=1 device=cpu backend=gloo host=vm"
    ...          "1: rank=1 local_rank=1 world=2 nodes=1 device=cpu backend=gloo host=vm")
    >>> [b["rank"] for b in parse_banners(glued)]
    [0, 1]
    """
    rows = [{k: int(v) if v.isdigit() else v for k, v in m.groupdict().items()}
            for m in _BANNER.finditer(text)]  # fmt: skip
    return sorted(rows, key=lambda r: r["rank"])


# a banner: its fields in order, the host ending where the line, a space, or the next rank's
# banner (after its label, if any) begins
_BANNER = re.compile(
    r"(?<!local_)rank=(?P<rank>\d+) local_rank=(?P<local_rank>\d+) world=(?P<world>\d+) "
    r"nodes=(?P<nodes>\d+) device=(?P<device>\S+?) backend=(?P<backend>\S+?) "
    r"host=(?P<host>\S+?)(?=(?:\[\d+\] |\d+: )?rank=\d|\s|$)",
    re.MULTILINE,
)


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


@contextmanager
def distributed(
    backend: str | None = None,
    timeout_s: float = 300.0,
    device: str | None = None,
    rendezvous_timeout_s: float = 60.0,
) -> Iterator[DistInfo]:
    """Initialise torch.distributed for this rank, yield a :class:`DistInfo`, undo what it did.

    The local device is set before ``init_process_group``; ``MASTER_ADDR``/``MASTER_PORT``
    are restored to what they were afterwards, even on error.

    Already inside a process group (your own ``init_process_group``, or an outer
    ``distributed()``)? Then it joins that group: nothing is initialised, the device and the
    rendezvous variables are left as they are, and on exit the group stays up for its owner
    (:func:`join_group`). Only a group this call created is destroyed.

    Rendezvous: under MPI, rank 0 publishes its short host name + the system's
    ``hsn_suffix`` when that resolves to this host, else one of its IPs (one
    ``hpcprof-kit:`` line on stderr says so); torchrun's ``MASTER_ADDR`` is used as given.
    A name that does not resolve fails at once, and a store not reached within
    ``rendezvous_timeout_s`` fails with :class:`DistError` naming host and port;
    ``timeout_s`` bounds each collective.

    On a normal exit every rank settles the group before ``destroy_process_group()``
    (:func:`_settle`). It imports ``torch._dynamo`` before creating the group, so building
    DDP or calling ``torch.compile`` inside the block needs nothing more from you: imported
    while a group is live (DDP does on first use), torch's compiler stack keeps references
    that stop ``destroy_process_group()`` from freeing the group, so gloo's threads lived on
    into the interpreter's exit, where one still freeing a work aborted the rank now and then
    ("terminate called without an active exception", exit status 6 under mpiexec).

    >>> with distributed() as info:          # a single process needs no MPI
    ...     print(info.world_size, info.backend)
    1 gloo
    """
    from datetime import timedelta

    import torch.distributed as tdist

    from hpcprof_kit import device as devmod
    from hpcprof_kit.systems import detect_system, load_system

    _import_dynamo()
    if tdist.is_available() and tdist.is_initialized():
        yield join_group(backend, device)
        return
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
        addr, port, mpi_nodes = _rendezvous(ranks, host, suffix, verify=True)
        nodes = max(mpi_nodes, ranks.nodes) if ranks.world_size > 1 else 1
    made = False
    try:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = addr, port
        devmod.set_current(local)  # before init: a collective must not land on device 0
        kwargs = {"device_id": local} if local.type != "cpu" else {}
        # The MPI backend meets through MPI itself: torch ignores any store for it.
        store = None
        if chosen != "mpi":
            store = connect_store(addr, port, ranks, rendezvous_timeout_s, timeout_s)
        tdist.init_process_group(
            backend=chosen,
            rank=ranks.rank,
            world_size=ranks.world_size,
            timeout=timedelta(seconds=timeout_s),
            store=store,
            **kwargs,
        )
        made = True
        yield DistInfo(
            ranks.rank, ranks.local_rank, ranks.world_size, nodes, str(local), chosen, host
        )
        if tdist.is_initialized():  # the body may have destroyed it itself
            _settle(tdist)
    finally:
        if made and tdist.is_initialized():
            tdist.destroy_process_group()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def join_group(backend: str | None = None, device: str | None = None) -> DistInfo:
    """The :class:`DistInfo` of the process group already running here (nothing is changed).

    Rank, world size and backend come from the group; local rank and nodes from the
    launcher's variables when they agree with it (else the current device's index and 1);
    the device is the current one. A ``backend`` other than the group's is a
    :class:`DistError`: the group cannot change backend.
    """
    import torch.distributed as tdist

    from hpcprof_kit import device as devmod

    rank, world = tdist.get_rank(), tdist.get_world_size()
    running = str(tdist.get_backend())
    if backend and backend not in running.split(":"):  # "cpu:gloo,cuda:nccl" lists several
        raise DistError(
            f"backend {backend!r} was asked for, but this process is already in a {running} "
            f"group of {world} rank(s) (made by init_process_group before distributed()); "
            "leave backend out to join that group, or destroy it first"
        )
    kind = devmod.detect(device)
    current = _current_device(kind)
    try:
        env = ranks_from_env(use_mpi=False)
    except DistError:
        env = None
    if env is not None and (env.rank, env.world_size) == (rank, world):
        local_rank, nodes = env.local_rank, env.nodes
    else:
        local_rank, nodes = current.index or 0, 1
    return DistInfo(rank, local_rank, world, nodes, str(current), running, socket.gethostname())


def _current_device(kind: str) -> Any:
    import torch

    if kind in ("cpu", "mps"):
        return torch.device(kind)
    return torch.device(kind, getattr(torch, kind).current_device())


def _import_dynamo() -> None:
    """Import torch's compiler stack now, before any group exists (see :func:`distributed`)."""
    with suppress(ImportError):
        import torch._dynamo  # noqa: F401


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
    "BACKEND_FOR_DEVICE", "DistInfo", "choose_backend", "distributed", "join_group",
    "parse_banners",
]  # fmt: skip
