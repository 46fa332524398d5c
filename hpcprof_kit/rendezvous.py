"""Where the ranks meet: rank 0's address and port (MASTER_ADDR/MASTER_PORT), shared over MPI,
and this rank's c10d store, reached within its own timeout.

A rendezvous never hangs on a name: rank 0 publishes its short host name plus the system's
high-speed-network suffix only when that resolves to this machine (else one of its IPs, with one
warning), every rank refuses an unresolvable MASTER_ADDR at once, and the store connection gives
up after ``rendezvous_timeout_s`` with an error naming host, port and timeout.
:func:`hpcprof_kit.dist.distributed` uses it.

>>> candidate_name("x4102c5s0b0n0.hostmgmt.example", ".hsn.cm.aurora.alcf.anl.gov")
'x4102c5s0b0n0.hsn.cm.aurora.alcf.anl.gov'
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from contextlib import suppress
from typing import Any

from hpcprof_kit.errors import DistError
from hpcprof_kit.ranks import RankInfo

NAME_FIX = (
    "fix: give MASTER_ADDR a name or IP that resolves on every node (torchrun: --master-addr "
    "or --rdzv-endpoint; under MPI rank 0 publishes its short host name + the system record's "
    "hsn_suffix: check HPCPROF_SYSTEM and that record)"
)


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
