"""Who this process is: rank, local rank, world size and node count from the launcher's variables.

Every launcher tells a process who it is through environment variables, each with its own
names (PALS, PMIx, Hydra/PMI, Open MPI, Slurm, torchrun). The chains below are the one place
those names live; :func:`ranks_from_env` reads them in this documented order, and the
generated wrapper scripts (tracers, per-rank device masks) consult the same lists.

>>> info = ranks_from_env({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1",
...                        "MPI_LOCALNRANKS": "2"})
>>> (info.rank, info.local_rank, info.world_size, info.nodes, info.source)
(1, 1, 2, 1, 'Hydra/PMI')
"""

from __future__ import annotations

import os
from collections.abc import Mapping
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
# Ranks on this node, as each launcher says it. Slurm's come last: srun sets the step's layout
# per node ("4(x2),1": this node's entry is at SLURM_NODEID); --ntasks-per-node is a maximum.
LOCAL_SIZE_VARS: tuple[str, ...] = (
    "LOCAL_WORLD_SIZE",
    "PALS_LOCAL_SIZE",
    "PMI_LOCAL_SIZE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MPI_LOCALNRANKS",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_NTASKS_PER_NODE",
)
_SLURM_LAYOUT_VARS = ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
NODE_COUNT_VARS: tuple[str, ...] = ("SLURM_NNODES", "SLURM_JOB_NUM_NODES", "PALS_NUM_NODES")
# Variables that belong to one launcher family; a Slurm variable is ignored when an MPI
# launcher ran inside the allocation (its SLURM_* values describe the proxy, not the rank).
_MPI_RANK_VARS = ("PMIX_RANK", "PALS_RANKID", "PMI_RANK", "OMPI_COMM_WORLD_RANK")
# SLURM_LOCALID stays usable as a last resort: srun --mpi=pmi2 sets it beside PMI_RANK.
_SLURM_ONLY = {"SLURM_PROCID", "SLURM_NTASKS"}


@dataclass(frozen=True)
class RankInfo:
    """Who this process is, and which launcher's variables said so."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    nodes: int
    source: str


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


def tasks_per_node(layout: str) -> list[int]:
    """Slurm's per-node task counts: ``"4(x2),1"`` -> ``[4, 4, 1]``.

    >>> tasks_per_node("4(x2),1"), tasks_per_node("12")
    ([4, 4, 1], [12])
    """
    counts: list[int] = []
    for part in layout.split(","):
        count, _, repeat = part.strip().partition("(x")
        if not count.isdigit() or (repeat and not repeat.rstrip(")").isdigit()):
            raise DistError(
                f"SLURM_TASKS_PER_NODE={layout!r} is not Slurm's layout syntax (e.g. '4(x2),1'); "
                "unset it if it was left over from another job"
            )
        counts += [int(count)] * (int(repeat.rstrip(")")) if repeat else 1)
    return counts


def _slurm_local_size(env: Mapping[str, str], name: str) -> int | None:
    """This node's entry of a Slurm layout variable; None when the node is not named."""
    counts = tasks_per_node(env[name])
    if len(set(counts)) == 1:
        return counts[0]
    node = env.get("SLURM_NODEID", "").strip()
    if node.isdigit() and int(node) < len(counts):
        return counts[int(node)]
    return None


def _local_size(
    env: Mapping[str, str], skip: set[str], rank: int
) -> tuple[int, str] | tuple[None, None]:
    """Ranks on this node and the variable that said so, from the launcher's own variables."""
    # Slurm's layout describes this process only when srun started it (not a Hydra proxy).
    slurm_started = "SLURM_PROCID" in env and _int(env, "SLURM_PROCID") == rank
    for name in LOCAL_SIZE_VARS:
        if name not in env or name in skip:
            continue
        if name.startswith("SLURM_") and not slurm_started:
            continue
        size = _slurm_local_size(env, name) if name in _SLURM_LAYOUT_VARS else _int(env, name)
        if size:
            return size, name
    return None, None


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
    single process. Conflicting variables raise :class:`DistError` naming them. Ranks per
    node come from the launcher's own variables (:data:`LOCAL_SIZE_VARS`), never world / nodes,
    so uneven layouts hold: ``srun -n 5 -N 2 --ntasks-per-node=4`` puts 4 + 1 ranks.

    >>> ranks_from_env({"SLURM_PROCID": "3", "SLURM_LOCALID": "3", "SLURM_NTASKS": "5",
    ...                 "SLURM_NNODES": "2", "SLURM_TASKS_PER_NODE": "4,1", "SLURM_NODEID": "0"})
    RankInfo(rank=3, local_rank=3, world_size=5, local_world_size=4, nodes=2, source='Slurm')
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
    local_world, lsize_var = _local_size(env, skip, rank)
    if local_world is None:
        # The launcher did not say: an even spread is a guess that an uneven layout
        # (-n 5 -N 2: 4 + 1) outgrows, so the local rank, when known, raises it.
        local_world = max(-(-world // _nodes_from_env(env, world, 0)), 1)
        if local_var:
            local_world = max(local_world, _int(env, local_var) + 1)
    # Without a local-rank variable, assume the launcher filled nodes in rank order.
    local_rank = _int(env, local_var) if local_var else rank % local_world
    if local_rank >= local_world:
        raise DistError(
            f"{local_var}={local_rank} is not below the ranks per node {local_world} (from "
            f"{lsize_var}); unset stale variables from another launcher"
        )
    nodes = _nodes_from_env(env, world, local_world)
    return RankInfo(rank, local_rank, world, local_world, nodes, source)
