"""Rendezvous, backend choice, process-group init and teardown, for the ranks a launcher started.

Who each process is comes from :mod:`hpcprof_kit.ranks` (re-exported here:
``hpcprof_kit.dist.ranks_from_env``); :func:`distributed` turns it into an initialised process
group and tears it down again, or joins the group a script already made and leaves it up.

>>> info = ranks_from_env({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1",
...                        "MPI_LOCALNRANKS": "2"})
>>> (info.rank, info.local_rank, info.world_size, info.nodes, info.source)
(1, 1, 2, 1, 'Hydra/PMI')
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
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
NAME_FIX = (
    "fix: give MASTER_ADDR a name or IP that resolves on every node (torchrun: --master-addr "
    "or --rdzv-endpoint; under MPI rank 0 publishes its short host name + the system record's "
    "hsn_suffix: check HPCPROF_SYSTEM and that record)"
)


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


def candidate_name(host: str, suffix: str) -> str:
    """The name rank 0 tries first: its short host name plus the high-speed-network suffix.

    >>> candidate_name("x4102c5s0b0n0.hostmgmt.example", ".hsn.cm.aurora.alcf.anl.gov")
    'x4102c5s0b0n0.hsn.cm.aurora.alcf.anl.gov'
    >>> candidate_name("login1.example.org", "")  # no suffix: the host name as given
    'login1.example.org'
    """
    return host.split(".")[0] + suffix if suffix else host


def _local_addresses(name: str) -> list[str]:
    """The addresses ``name`` resolves to that belong to this machine (a socket binds there)."""
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except OSError:
        return []
    found: dict[str, None] = {}
    for family, _, _, _, sockaddr in infos:
        with suppress(OSError), socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((sockaddr[0], 0, *sockaddr[2:]))
            found[str(sockaddr[0])] = None
    return list(found)


def _outward_address() -> list[str]:
    """The IPv4 address this host routes outward from (a UDP connect sends no packet)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("203.0.113.1", 9))  # TEST-NET-3: never answered, only routed
            return [str(sock.getsockname()[0])]
    except OSError:
        return []


def publish_address(host: str, suffix: str, same_host: bool) -> tuple[str, str]:
    """(MASTER_ADDR rank 0 publishes, note): the candidate name, or an IP of this host.

    The name is :func:`candidate_name` when it resolves here to an address of this machine
    and the note is empty. Otherwise the address is an IP of this host - a non-loopback
    address of ``host`` first; loopback only when ``same_host`` (every rank runs here);
    else the one it routes outward from - and the note says why. :class:`DistError` when
    this host has no address the other ranks could reach.

    >>> publish_address("localhost", "", same_host=True)
    ('localhost', '')
    >>> publish_address("n0", ".invalid", same_host=True)[1].split(" (")[0]
    'MASTER_ADDR n0.invalid does not resolve here'
    """
    name = candidate_name(host, suffix)
    try:
        resolved = {i[4][0] for i in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)}
    except OSError as exc:  # socket.gaierror, e.g. [Errno -2] Name or service not known
        why = f"does not resolve here ({exc})"
    else:
        if _local_addresses(name):
            return name, ""
        why = f"resolves to {', '.join(sorted(map(str, resolved)))}, not an address of this host"
    mine = _local_addresses(host) + _local_addresses(host.split(".")[0])
    loop = [ip for ip in mine if ipaddress.ip_address(ip.split("%")[0]).is_loopback]
    usable = (
        [ip for ip in mine if ip not in loop] + (loop if same_host else []) + _outward_address()
    )
    if not usable:
        raise DistError(
            f"MASTER_ADDR {name} {why}, and host {host} has no address the other ranks could "
            f"reach (its own: {', '.join(mine) or 'none'}); {NAME_FIX}"
        )
    return usable[0], f"MASTER_ADDR {name} {why}; rank 0 publishes {usable[0]} instead"


def check_reachable(addr: str, port: str, rank: int) -> None:
    """Raise :class:`DistError` at once when ``addr`` does not resolve on this rank.

    c10d would retry such a name for minutes ("gai error: -2") before giving up.

    >>> check_reachable("127.0.0.1", "29500", rank=1)
    """
    try:
        socket.getaddrinfo(addr, int(port), type=socket.SOCK_STREAM)
    except OSError as exc:
        raise DistError(
            f"rank {rank} cannot resolve MASTER_ADDR {addr} (port {port}): {exc}; {NAME_FIX}"
        ) from None


def connect_store(
    addr: str, port: str, ranks: RankInfo, rendezvous_timeout_s: float, timeout_s: float
) -> Any:
    """This rank's c10d TCPStore at ``addr:port``, reached within ``rendezvous_timeout_s``.

    Rank 0 hosts it (under torchrun with an agent store, the agent does). Once every rank
    joined, the store's timeout becomes the collective one, ``timeout_s``.
    """
    from datetime import timedelta

    import torch.distributed as tdist

    check_reachable(addr, port, ranks.rank)
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"  # torchrun's agent hosts it
    try:
        store = tdist.TCPStore(
            addr,
            int(port),
            ranks.world_size,
            is_master=ranks.rank == 0 and not agent,
            timeout=timedelta(seconds=rendezvous_timeout_s),
        )
    except RuntimeError as exc:  # DistNetworkError, DistStoreError, a port already taken
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DistError(
            f"rank {ranks.rank} could not reach the rendezvous at {addr}:{port} within "
            f"{rendezvous_timeout_s:g} s ({reason}); fix: check that all {ranks.world_size} "
            f"ranks started and that {addr} is rank 0's address, reachable from every node "
            "(firewall, HSN name), or pass a longer rendezvous_timeout_s to distributed()"
        ) from None
    store.set_timeout(timedelta(seconds=timeout_s))
    return store


def _rendezvous(
    ranks: RankInfo, host: str, hsn_suffix: str, *, verify: bool = False
) -> tuple[str, str, int]:
    """(MASTER_ADDR, MASTER_PORT, nodes): rank 0's address and port, shared over MPI.

    Rank 0 publishes :func:`candidate_name`, or with ``verify`` (:func:`distributed`'s way)
    :func:`publish_address`'s choice, warning once on stderr when it is not the name.
    """
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
        mine = (candidate_name(host, hsn_suffix), "", str(free_port())) if ranks.rank == 0 else None
        if mine and verify:  # (address, note, port)
            try:
                mine = (*publish_address(host, hsn_suffix, len(set(hosts)) == 1), mine[2])
            except DistError as exc:  # broadcast it: the other ranks must not wait in bcast
                mine = ("", str(exc), "")
        addr, note, port = comm.bcast(mine, root=0)
    except DistError:
        raise
    except Exception as exc:  # an MPI that cannot reach the launcher fails here, not in torch
        raise DistError(
            f"MPI could not broadcast the rendezvous address ({type(exc).__name__}: {exc}); "
            "mpi4py must be built against the site MPI (e.g. Cray MPICH under PALS)"
        ) from None
    if not addr:
        raise DistError(f"rank 0 found no rendezvous address: {note}")
    if note and ranks.rank == 0:
        print(f"hpcprof-kit: {note}", file=sys.stderr, flush=True)
    return addr, port, len(set(hosts))


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
    "BACKEND_FOR_DEVICE", "DistInfo", "RankInfo", "candidate_name", "check_reachable",
    "choose_backend", "connect_store", "distributed", "free_port", "join_group", "parse_banners",
    "publish_address", "ranks_from_env",
]  # fmt: skip
