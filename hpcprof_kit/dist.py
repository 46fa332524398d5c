"""Ranks from the launcher's environment, rendezvous, backend choice, init and teardown.

Every launcher tells a process who it is through environment variables, each with its own
names (PALS, PMIx, Hydra/PMI, Open MPI, Slurm, torchrun). :func:`ranks_from_env` reads them in
one documented order; :func:`distributed` turns them into an initialised process group and
always tears it down again.

>>> info = ranks_from_env({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1",
...                        "MPI_LOCALNRANKS": "2"})
>>> (info.rank, info.local_rank, info.world_size, info.nodes, info.source)
(1, 1, 2, 1, 'Hydra/PMI')
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from hpcprof_kit.errors import DistError

# Who sets which variable, in the order to consult them (reference: systems.md "Rank variables").
# Slurm's SLURM_PROCID comes last: under Slurm, Hydra's mpiexec gives every rank SLURM_PROCID=0.
RANK_VARS: tuple[tuple[str, str], ...] = (
    ("RANK", "torchrun"),
    ("PMIX_RANK", "PMIx"),
    ("PALS_RANKID", "PALS"),
    ("PMI_RANK", "Hydra/PMI"),
    ("OMPI_COMM_WORLD_RANK", "Open MPI"),
    ("SLURM_PROCID", "Slurm"),
)
LOCAL_RANK_VARS: tuple[str, ...] = (
    "LOCAL_RANK",
    "PALS_LOCAL_RANKID",
    "PMIX_LOCAL_RANK",
    "PMI_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "SLURM_LOCALID",
)
WORLD_SIZE_VARS: tuple[str, ...] = (
    "WORLD_SIZE",
    "PMI_SIZE",
    "OMPI_COMM_WORLD_SIZE",
    "SLURM_NTASKS",
)
LOCAL_SIZE_VARS: tuple[str, ...] = (
    "LOCAL_WORLD_SIZE",
    "PALS_LOCAL_SIZE",
    "PMI_LOCAL_SIZE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MPI_LOCALNRANKS",
)
NODE_COUNT_VARS: tuple[str, ...] = ("SLURM_NNODES", "SLURM_JOB_NUM_NODES", "PALS_NUM_NODES")
# Variables that belong to one launcher family; a Slurm variable is ignored when an MPI
# launcher ran inside the allocation (its SLURM_* values describe the proxy, not the rank).
_MPI_RANK_VARS = ("PMIX_RANK", "PALS_RANKID", "PMI_RANK", "OMPI_COMM_WORLD_RANK")
# SLURM_LOCALID stays usable as a last resort: srun --mpi=pmi2 sets it beside PMI_RANK.
_SLURM_ONLY = {"SLURM_PROCID", "SLURM_NTASKS"}

# Backend by device type; "ccl" is the oneCCL-bindings fallback on older XPU stacks.
BACKEND_FOR_DEVICE: dict[str, str] = {"xpu": "xccl", "cuda": "nccl", "mps": "gloo", "cpu": "gloo"}
KNOWN_BACKENDS: tuple[str, ...] = ("gloo", "nccl", "xccl", "ccl", "mpi")


@dataclass(frozen=True)
class RankInfo:
    """Who this process is, and which launcher's variables said so."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    nodes: int
    source: str


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


def _int(env: Mapping[str, str], name: str) -> int:
    raw = env[name]
    try:
        value = int(raw.strip())
    except ValueError:
        raise DistError(
            f"{name}={raw!r} is not a whole number; the launcher sets it to the rank or size "
            f"- unset it (unset {name}) if it was left over from another job"
        ) from None
    if value < 0:
        raise DistError(f"{name}={value} is negative; ranks and sizes start at 0 - unset {name}")
    return value


def _first(env: Mapping[str, str], names: tuple[str, ...], skip: set[str]) -> str | None:
    return next((n for n in names if n in env and n not in skip), None)


def _check_agree(env: Mapping[str, str], names: list[str], what: str) -> None:
    values = {n: _int(env, n) for n in names}
    if len(set(values.values())) > 1:
        shown = ", ".join(f"{n}={v}" for n, v in values.items())
        raise DistError(
            f"conflicting {what} variables: {shown}; they come from different launchers - "
            f"unset the stale ones (often RANK/WORLD_SIZE exported by an earlier torchrun) "
            f"or start the job with a single launcher"
        )


def _nodes_from_env(env: Mapping[str, str], world: int, local_world: int) -> int:
    name = _first(env, NODE_COUNT_VARS, set())
    if name:
        return max(_int(env, name), 1)
    nodefile = env.get("PBS_NODEFILE")
    if nodefile and os.path.isfile(nodefile):
        with open(nodefile) as fh:
            hosts = {line.strip() for line in fh if line.strip()}
        if hosts:
            return len(hosts)
    if local_world > 0:
        return max(-(-world // local_world), 1)
    return 1


def _mpi_world() -> tuple[int, int]:
    """Rank and size from MPI itself (mpi4py, imported only when the environment is silent)."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise DistError(
            "no launcher variable gives the world size and mpi4py cannot be imported "
            f"({exc}); install mpi4py built against this system's MPI, or export WORLD_SIZE"
        ) from None
    return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()


def ranks_from_env(env: Mapping[str, str] | None = None, *, use_mpi: bool = True) -> RankInfo:
    """Rank, local rank, world size and node count from the launcher's variables.

    Order: ``RANK``, ``PMIX_RANK``, ``PALS_RANKID``, ``PMI_RANK``, ``OMPI_COMM_WORLD_RANK``,
    ``SLURM_PROCID``; then MPI (when a launcher is visible but silent on the size); else a
    single process. Conflicting variables raise :class:`DistError` naming them.

    >>> ranks_from_env({"PALS_RANKID": "13", "PMI_RANK": "13", "PMI_SIZE": "24",
    ...                 "PALS_LOCAL_RANKID": "1", "PALS_LOCAL_SIZE": "12"})
    RankInfo(rank=13, local_rank=1, world_size=24, local_world_size=12, nodes=2, source='PALS')
    >>> ranks_from_env({}).source
    'single process'
    """
    env = os.environ if env is None else env
    torchrun = "TORCHELASTIC_RUN_ID" in env and "RANK" in env
    mpi_present = [n for n in _MPI_RANK_VARS if n in env]
    # Ignore variables from the outer layer of a nested launch (see module constants).
    skip: set[str] = set(_SLURM_ONLY) if mpi_present else set()
    if torchrun:
        skip |= {n for n, _ in RANK_VARS[1:]} | set(LOCAL_RANK_VARS[1:]) | set(WORLD_SIZE_VARS[1:])
        skip |= set(LOCAL_SIZE_VARS[1:])

    rank_names = [n for n, _ in RANK_VARS if n in env and n not in skip]
    if len(rank_names) > 1:
        _check_agree(env, rank_names, "rank")
    size_names = [n for n in WORLD_SIZE_VARS if n in env and n not in skip]
    if len(size_names) > 1:
        _check_agree(env, size_names, "world size")

    if not rank_names:
        if size_names and _int(env, size_names[0]) > 1:
            raise DistError(
                f"{size_names[0]}={env[size_names[0]]} says there are several ranks, but no "
                f"rank variable is set (looked for {', '.join(n for n, _ in RANK_VARS)}); "
                "start the program with mpiexec/srun/torchrun, or unset the size variable"
            )
        return RankInfo(0, 0, 1, 1, 1, "single process")

    rank_var = rank_names[0]
    source = dict(RANK_VARS)[rank_var]
    rank = _int(env, rank_var)
    if size_names:
        world = _int(env, size_names[0])
    elif use_mpi:
        mpi_rank, world = _mpi_world()
        source += "+MPI"
        if mpi_rank != rank:
            raise DistError(
                f"{rank_var}={rank} but MPI says this is rank {mpi_rank}; the variable is stale "
                f"- unset {rank_var}, or use mpi4py built against the MPI that started the job"
            )
    else:
        raise DistError(
            f"{rank_var}={rank} is set but no world-size variable is "
            f"({', '.join(WORLD_SIZE_VARS)}); export WORLD_SIZE or let MPI tell it"
        )
    if world < 1 or rank >= world:
        raise DistError(
            f"{rank_var}={rank} is not below the world size {world} (from "
            f"{size_names[0] if size_names else 'MPI'}); ranks run from 0 to world size - 1 - "
            "check the launcher's -n/--ntasks and unset variables left from other jobs"
        )
    local_var = _first(env, LOCAL_RANK_VARS, skip)
    lsize_var = _first(env, LOCAL_SIZE_VARS, skip)
    nodes_guess = _nodes_from_env(env, world, 0)
    local_world = _int(env, lsize_var) if lsize_var else max(-(-world // nodes_guess), 1)
    # Without a local-rank variable, assume the launcher filled nodes in rank order.
    local_rank = _int(env, local_var) if local_var else rank % local_world
    if local_rank >= local_world:
        raise DistError(
            f"{local_var}={local_rank} is not below the ranks per node {local_world} (from "
            f"{lsize_var or 'world size / nodes'}); unset stale variables from another launcher"
        )
    nodes = _nodes_from_env(env, world, local_world)
    return RankInfo(rank, local_rank, world, local_world, nodes, source)


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
    finally:
        if tdist.is_initialized():
            tdist.destroy_process_group()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


__all__ = [
    "BACKEND_FOR_DEVICE", "DistInfo", "RankInfo", "choose_backend", "distributed",
    "free_port", "parse_banners", "ranks_from_env",
]  # fmt: skip
