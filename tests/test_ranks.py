"""Ranks per node from the launcher's own variables: uneven Slurm layouts, Slurm's layout
syntax, and a Hydra proxy's Slurm variables ignored."""

from __future__ import annotations

import pytest

from hpcprof_kit.errors import DistError
from hpcprof_kit.ranks import ranks_from_env, tasks_per_node

# srun -n 5 -N 2 --ntasks-per-node=4: four ranks on node 0, one on node 1.
UNEVEN = {"SLURM_NTASKS": "5", "SLURM_NNODES": "2", "SLURM_TASKS_PER_NODE": "4,1",
          "SLURM_NTASKS_PER_NODE": "4"}  # fmt: skip


@pytest.mark.parametrize(
    ("rank", "local_rank", "node", "local_size"),
    [(0, 0, 0, 4), (3, 3, 0, 4), (4, 0, 1, 1)],
)
def test_uneven_slurm_layout_gives_each_node_its_own_size(rank, local_rank, node, local_size):
    env = {**UNEVEN, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(local_rank),
           "SLURM_NODEID": str(node)}  # fmt: skip
    info = ranks_from_env(env, use_mpi=False)
    assert (info.rank, info.local_rank, info.local_world_size, info.world_size, info.nodes) == (
        rank, local_rank, local_size, 5, 2,
    )  # fmt: skip


def test_the_issues_layout_without_a_size_variable_is_accepted():
    env = {"SLURM_PROCID": "3", "SLURM_LOCALID": "3", "SLURM_NTASKS": "5", "SLURM_NNODES": "2"}
    info = ranks_from_env(env, use_mpi=False)
    assert (info.rank, info.local_rank, info.local_world_size, info.nodes) == (3, 3, 4, 2)


def test_step_layout_wins_over_the_allocations():
    # Inside srun the step's layout is this process's; the batch layout is the allocation's.
    env = {"SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_NTASKS": "2", "SLURM_NNODES": "1",
           "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_TASKS_PER_NODE": "8"}  # fmt: skip
    assert ranks_from_env(env, use_mpi=False).local_world_size == 2


def test_repeat_syntax_names_this_nodes_entry():
    assert tasks_per_node("4(x2),1") == [4, 4, 1]
    env = {"SLURM_PROCID": "8", "SLURM_LOCALID": "0", "SLURM_NTASKS": "9", "SLURM_NNODES": "3",
           "SLURM_TASKS_PER_NODE": "4(x2),1", "SLURM_NODEID": "2"}  # fmt: skip
    assert ranks_from_env(env, use_mpi=False).local_world_size == 1


def test_a_launcher_size_still_refuses_a_local_rank_beyond_it():
    env = {**UNEVEN, "SLURM_PROCID": "4", "SLURM_LOCALID": "1", "SLURM_NODEID": "1"}
    with pytest.raises(
        DistError,
        match=r"SLURM_LOCALID=1 is not below the ranks per node 1 \(from SLURM_TASKS_PER_NODE\)",
    ):
        ranks_from_env(env, use_mpi=False)


def test_hydra_proxy_slurm_layout_is_not_the_ranks():
    # Hydra's mpiexec in a 2-node Slurm job: the proxy's SLURM_* describe one task per node.
    env = {"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4",
           "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "2", "SLURM_NNODES": "2",
           "SLURM_TASKS_PER_NODE": "1(x2)", "SLURM_NODEID": "1"}  # fmt: skip
    info = ranks_from_env(env, use_mpi=False)
    assert (info.local_rank, info.local_world_size, info.source) == (1, 4, "Hydra/PMI")


def test_malformed_layout_names_the_variable():
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_TASKS_PER_NODE": "two"}
    with pytest.raises(DistError, match=r"SLURM_TASKS_PER_NODE='two' is not Slurm's layout"):
        ranks_from_env(env, use_mpi=False)
