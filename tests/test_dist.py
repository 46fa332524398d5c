"""Ranks from each launcher's variables, their conflicts, and a real 2-rank rendezvous."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from hpcprof_kit.dist import choose_backend, distributed, parse_banners
from hpcprof_kit.errors import DistError
from hpcprof_kit.ranks import RankInfo, ranks_from_env

# What each launcher really exports for rank 5 of 8, 4 ranks per node on 2 nodes.
LAUNCHER_SETS = {
    "PALS": {
        "PALS_RANKID": "5", "PALS_LOCAL_RANKID": "1", "PALS_LOCAL_SIZE": "4",
        "PMI_RANK": "5", "PMI_SIZE": "8", "PMI_LOCAL_RANK": "1", "PMI_LOCAL_SIZE": "4",
    },
    "PMIx": {
        "PMIX_RANK": "5", "PMIX_LOCAL_RANK": "1", "PALS_RANKID": "5",
        "PALS_LOCAL_RANKID": "1", "PALS_LOCAL_SIZE": "4", "PMI_SIZE": "8",
    },
    "Hydra/PMI": {
        "PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4",
    },
    "Open MPI": {
        "OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
    },
    "Slurm": {
        "SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8", "SLURM_NNODES": "2",
    },
    "torchrun": {
        "RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
        "TORCHELASTIC_RUN_ID": "job1",
    },
}  # fmt: skip


@pytest.mark.parametrize("source", list(LAUNCHER_SETS))
def test_each_launcher_gives_rank_local_rank_world_and_nodes(source):
    info = ranks_from_env(LAUNCHER_SETS[source], use_mpi=False)
    assert info == RankInfo(
        rank=5, local_rank=1, world_size=8, local_world_size=4, nodes=2, source=source
    )


def _launcher_env(source: str, rank: int, world: int, per_node: int) -> dict[str, str]:
    """The variables of ``source`` for one rank, built from the same templates as above."""
    values = {"5": str(rank), "8": str(world), "1": str(rank % per_node), "4": str(per_node),
              "2": str(-(-world // per_node))}  # fmt: skip
    return {k: values.get(v, v) for k, v in LAUNCHER_SETS[source].items()}


@given(
    source=st.sampled_from(list(LAUNCHER_SETS)),
    world=st.integers(1, 4096),
    per_node=st.integers(1, 12),
    rank_seed=st.integers(0, 4095),
)
# Found by the suite on a fresh clone: -n 5 -N 2 --ntasks-per-node=4 (4 + 1 ranks), rank 3.
@example(source="Slurm", world=5, per_node=4, rank_seed=3)
def test_any_rank_of_any_launcher_round_trips(source, world, per_node, rank_seed):
    per_node = min(per_node, world)
    rank = rank_seed % world
    env = _launcher_env(source, rank, world, per_node)
    if source == "Slurm":
        env["SLURM_NNODES"] = str(-(-world // per_node))
    info = ranks_from_env(env, use_mpi=False)
    assert (info.rank, info.world_size, info.local_rank, info.source) == (
        rank,
        world,
        rank % per_node,
        source,
    )
    assert info.nodes == -(-world // per_node)


def test_local_rank_beyond_ranks_per_node_is_refused():
    env = {**LAUNCHER_SETS["Hydra/PMI"], "MPI_LOCALRANKID": "4"}
    with pytest.raises(
        DistError,
        match=r"MPI_LOCALRANKID=4 is not below the ranks per node 4 \(from MPI_LOCALNRANKS\)",
    ):
        ranks_from_env(env, use_mpi=False)


def test_hydra_inside_slurm_ignores_the_proxy_slurm_procid():
    # Hydra's mpiexec in a Slurm job: every rank sees SLURM_PROCID=0 (one proxy per node).
    env = {**LAUNCHER_SETS["Hydra/PMI"], "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
           "SLURM_NTASKS": "2", "SLURM_NNODES": "2", "SLURM_JOB_ID": "7"}  # fmt: skip
    info = ranks_from_env(env, use_mpi=False)
    assert (info.rank, info.local_rank, info.world_size, info.nodes, info.source) == (
        5,
        1,
        8,
        2,
        "Hydra/PMI",
    )


def test_srun_pmi2_sets_both_and_they_agree():
    env = {**LAUNCHER_SETS["Slurm"], "PMI_RANK": "5", "PMI_SIZE": "8"}
    assert ranks_from_env(env, use_mpi=False).rank == 5


def test_torchrun_inside_an_mpi_launch_trusts_torchrun():
    env = {**LAUNCHER_SETS["torchrun"], "PMI_RANK": "0", "PMI_SIZE": "2"}
    info = ranks_from_env(env, use_mpi=False)
    assert (info.rank, info.world_size, info.source) == (5, 8, "torchrun")


def test_no_launcher_is_a_single_process():
    assert ranks_from_env({}, use_mpi=False) == RankInfo(0, 0, 1, 1, 1, "single process")


def test_stale_rank_from_another_launcher_is_a_conflict():
    env = {**LAUNCHER_SETS["Hydra/PMI"], "RANK": "1"}
    with pytest.raises(DistError, match=r"conflicting rank variables: RANK=1, PMI_RANK=5.*unset"):
        ranks_from_env(env, use_mpi=False)


def test_world_sizes_that_disagree_are_a_conflict():
    env = {**LAUNCHER_SETS["Hydra/PMI"], "WORLD_SIZE": "4"}
    with pytest.raises(
        DistError, match=r"conflicting world size variables: WORLD_SIZE=4, PMI_SIZE=8"
    ):
        ranks_from_env(env, use_mpi=False)


def test_rank_beyond_world_size_names_both():
    with pytest.raises(
        DistError, match=r"PMI_RANK=8 is not below the world size 8 \(from PMI_SIZE\)"
    ):
        ranks_from_env({"PMI_RANK": "8", "PMI_SIZE": "8"}, use_mpi=False)


def test_not_a_number_names_the_variable():
    with pytest.raises(DistError, match=r"PMI_RANK='one' is not a whole number.*unset PMI_RANK"):
        ranks_from_env({"PMI_RANK": "one", "PMI_SIZE": "2"}, use_mpi=False)


def test_size_without_rank_says_how_to_start():
    with pytest.raises(DistError, match=r"WORLD_SIZE=4 says there are several ranks.*mpiexec"):
        ranks_from_env({"WORLD_SIZE": "4"}, use_mpi=False)


def test_rank_without_size_asks_mpi_or_says_so():
    with pytest.raises(DistError, match=r"PALS_RANKID=3 is set but no world-size variable"):
        ranks_from_env({"PALS_RANKID": "3"}, use_mpi=False)


def test_pbs_nodefile_counts_nodes(tmp_path):
    nodefile = tmp_path / "nodes"
    nodefile.write_text("x1000c0s0b0n0\nx1000c0s0b0n0\nx1000c0s1b0n0\n")
    env = {**LAUNCHER_SETS["Hydra/PMI"], "PBS_NODEFILE": str(nodefile)}
    del env["MPI_LOCALNRANKS"]
    info = ranks_from_env(env, use_mpi=False)
    assert (info.nodes, info.local_world_size) == (2, 4)


def test_unknown_backend_names_the_known_ones():
    with pytest.raises(DistError, match=r"backend 'ncl' is unknown \(known: gloo, nccl, xccl"):
        choose_backend("cpu", "ncl")


def test_backend_not_built_here_points_at_is_backend_available():
    import torch.distributed as tdist

    # torch says which it lacks: the CPU wheel has no nccl, PyPI's CUDA wheel (torch 2.8) no xccl
    absent = next(b for b in ("nccl", "xccl", "mpi") if not tdist.is_backend_available(b))
    with pytest.raises(DistError, match=rf"is_backend_available\('{absent}'\) is False"):
        choose_backend("cpu", absent)


def test_xpu_without_xccl_or_oneccl_says_what_to_load():
    with pytest.raises(DistError, match=r"neither xccl .* nor oneccl_bindings_for_pytorch"):
        choose_backend("xpu")


def test_single_process_context_restores_rendezvous_vars(monkeypatch):
    for key in (
        "PMI_RANK",
        "PMI_SIZE",
        "RANK",
        "WORLD_SIZE",
        "SLURM_PROCID",
        "OMPI_COMM_WORLD_RANK",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HPCPROF_DEVICE", "cpu")  # gloo on a GPU node too (one GPU: nccl, cuda:0)
    import torch.distributed as tdist

    before = os.environ.get("MASTER_PORT")
    os.environ["MASTER_PORT"] = "1234"  # a value the caller had before must come back
    try:
        with distributed() as info:
            assert tdist.is_initialized() and tdist.get_world_size() == 1
            assert os.environ["MASTER_PORT"] != "1234"
        assert not tdist.is_initialized()
        assert os.environ["MASTER_PORT"] == "1234" and "MASTER_ADDR" not in os.environ
    finally:
        if before is None:
            os.environ.pop("MASTER_PORT", None)
        else:
            os.environ["MASTER_PORT"] = before
    assert (info.rank, info.world_size, info.device, info.backend) == (0, 1, "cpu", "gloo")


def test_teardown_happens_when_the_body_fails(monkeypatch):
    monkeypatch.delenv("PMI_RANK", raising=False)
    import torch.distributed as tdist

    with pytest.raises(ZeroDivisionError), distributed():
        1 / 0  # noqa: B018
    assert not tdist.is_initialized() and "MASTER_ADDR" not in os.environ


PROBE = textwrap.dedent(
    """
    import os, sys, torch, torch.distributed as tdist
    from hpcprof_kit.dist import distributed

    def say(line):  # one write per line, so Hydra never interleaves two ranks mid-line
        sys.stdout.write(line + "\\n")
        sys.stdout.flush()

    with distributed() as info:
        say(info.banner())
        total = torch.tensor([float(info.rank + 1)])
        tdist.all_reduce(total)
        say(f"rank={info.rank} sum={total.item():g} addr={os.environ['MASTER_ADDR']}")
    say(f"rank={info.rank} after MASTER_ADDR={os.environ.get('MASTER_ADDR')}")
    """
)


@pytest.mark.mpi
def test_two_ranks_under_hydra_mpiexec_agree_on_everything(mpiexec, tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    done = subprocess.run([mpiexec, "-n", "2", sys.executable, str(script)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    # the ranks write at once: two lines can arrive joined on one, which the kit's parser reads
    banners = [tuple(str(b[k]) for k in ("rank", "local_rank", "world", "nodes", "device",
                                         "backend")) for b in parse_banners(done.stdout)]  # fmt: skip
    assert sorted(banners) == [
        ("0", "0", "2", "1", "cpu", "gloo"),
        ("1", "1", "2", "1", "cpu", "gloo"),
    ]
    # A real collective ran over the rendezvous: 1 + 2 on both ranks.
    ends = r"(?=rank=|\s|$)"  # a value ends where the line or the other rank's line begins
    assert sorted(re.findall(rf"rank=(\d) sum=(\S+?){ends}", done.stdout)) == [
        ("0", "3"),
        ("1", "3"),
    ]
    assert sorted(re.findall(rf"rank=(\d) after MASTER_ADDR=(\S+?){ends}", done.stdout)) == [
        ("0", "None"), ("1", "None")]  # fmt: skip


class _StandinComm:
    """An MPI communicator that is not the launcher's: wrong size, or a broadcast that fails."""

    def __init__(self, size: int, broken: bool = False) -> None:
        self.size, self.broken = size, broken

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's spelling
        return self.size

    def allgather(self, value):
        return [value] * self.size

    def bcast(self, value, root=0):
        if self.broken:
            raise RuntimeError("PMI_Barrier failed: no connection to the process manager")
        return value


def _two_ranks() -> RankInfo:
    return ranks_from_env({"PMI_RANK": "0", "PMI_SIZE": "2"}, use_mpi=False)


def test_world_size_that_disagrees_with_mpi_is_refused_standin_mpi(monkeypatch):
    from hpcprof_kit import rendezvous

    # mpi4py from another MPI
    monkeypatch.setattr(rendezvous, "_mpi_comm", lambda: _StandinComm(size=1))
    with pytest.raises(
        DistError,
        match=r"launcher says world size 2 \(Hydra/PMI\) but MPI says 1.*mpi4py built against",
    ):
        rendezvous._rendezvous(_two_ranks(), "n0", "")


def test_srun_without_pmi_says_which_flag_standin_mpi(monkeypatch):
    from hpcprof_kit import rendezvous

    monkeypatch.setattr(rendezvous, "_mpi_comm", lambda: _StandinComm(size=1))
    ranks = ranks_from_env(LAUNCHER_SETS["Slurm"], use_mpi=False)
    with pytest.raises(DistError, match=r"world size 8 \(Slurm\) but MPI says 1.*pass --mpi=pmi2"):
        rendezvous._rendezvous(ranks, "n0", "")


def test_mpi_that_cannot_broadcast_says_rebuild_mpi4py_standin_mpi(monkeypatch):
    from hpcprof_kit import rendezvous

    monkeypatch.setattr(rendezvous, "_mpi_comm", lambda: _StandinComm(size=2, broken=True))
    with pytest.raises(
        DistError,
        match=r"MPI could not broadcast.*PMI_Barrier failed.*mpi4py must be built against the site MPI",
    ):
        rendezvous._rendezvous(_two_ranks(), "n0", "")


def test_rendezvous_adds_the_high_speed_network_suffix_standin_mpi(monkeypatch):
    from hpcprof_kit import rendezvous

    monkeypatch.setattr(rendezvous, "_mpi_comm", lambda: _StandinComm(size=2))
    addr, port, nodes = rendezvous._rendezvous(
        _two_ranks(), "x4102c5s0b0n0", ".hsn.cm.aurora.alcf.anl.gov"
    )
    assert addr == "x4102c5s0b0n0.hsn.cm.aurora.alcf.anl.gov" and int(port) > 0 and nodes == 1
