"""Which backend ``auto`` picks: inside an allocation the job runs right there (the workshop's
JupyterLab on a compute node), never through a second qsub/sbatch; from a login node, the
scheduler. Scheduler commands here are stand-ins: executables on a temporary PATH."""

from __future__ import annotations

import json
import os

import pytest

from hpcprof_kit.errors import SubmitError
from hpcprof_kit.jobs import JobSpec, submit
from hpcprof_kit.jobs.backends import allocation_nodes, choose_backend
from hpcprof_kit.systems import load_system

SCHEDULER_VARS = ("PBS_JOBID", "PBS_NODEFILE", "SLURM_JOB_ID", "SLURM_JOB_NUM_NODES",
                  "SLURM_NNODES")  # fmt: skip


@pytest.fixture
def standin_path(tmp_path, monkeypatch):
    """A PATH holding stand-in qsub and sbatch (they only fail if called) plus bash."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("qsub", "sbatch"):
        tool = bindir / name
        tool.write_text(f"#!/bin/sh\necho 'standin {name} must not be called' >&2\nexit 99\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    for var in SCHEDULER_VARS:
        monkeypatch.delenv(var, raising=False)
    return bindir


def pbs_allocation(monkeypatch, tmp_path, hosts: list[str], job: str = "4242.aurora-pbs"):
    """What qsub -I sets: a job id and a nodefile with one line per rank slot."""
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("".join(f"{h}\n" for h in hosts))
    monkeypatch.setenv("PBS_JOBID", job)
    monkeypatch.setenv("PBS_NODEFILE", str(nodefile))


def test_login_node_with_standin_qsub_submits_through_pbs(standin_path):
    assert choose_backend(load_system("aurora"), "auto", nodes=2) == "pbs"
    assert choose_backend(load_system("slurm"), "auto", nodes=2) == "slurm"


def test_interactive_pbs_job_runs_locally_although_standin_qsub_is_on_path(
    standin_path, monkeypatch, tmp_path
):
    pbs_allocation(monkeypatch, tmp_path, ["x4000c0s0b0n0"] * 12 + ["x4000c0s1b0n0"] * 12)
    aurora = load_system("aurora")
    assert allocation_nodes("pbs") == 2
    assert choose_backend(aurora, "auto", nodes=1) == "local"
    assert choose_backend(aurora, "auto", nodes=2) == "local"


def test_allocation_too_small_names_both_counts_and_the_fixes_standin_qsub(
    standin_path, monkeypatch, tmp_path
):
    pbs_allocation(monkeypatch, tmp_path, ["x4000c0s0b0n0"] * 12)
    with pytest.raises(SubmitError) as info:
        choose_backend(load_system("aurora"), "auto", nodes=2)
    assert str(info.value) == (
        "nodes 2 does not fit the pbs allocation this process runs in (4242.aurora-pbs: 1 node); "
        "jobs started inside an allocation run right here rather than through a second qsub. "
        "Ask for nodes <= 1, or submit from a login node with backend='pbs'"
    )


def test_explicit_backend_still_wins_inside_an_allocation_standin_qsub(
    standin_path, monkeypatch, tmp_path
):
    pbs_allocation(monkeypatch, tmp_path, ["x4000c0s0b0n0"])
    assert choose_backend(load_system("aurora"), "pbs", nodes=8) == "pbs"


def test_pbs_jobid_alone_counts_as_a_one_node_allocation_standin_qsub(standin_path, monkeypatch):
    monkeypatch.setenv("PBS_JOBID", "7.polaris-pbs")
    assert allocation_nodes("pbs") == 1
    assert choose_backend(load_system("polaris"), "auto", nodes=1) == "local"


@pytest.mark.parametrize("count_var", ["SLURM_JOB_NUM_NODES", "SLURM_NNODES"])
def test_salloc_runs_locally_with_standin_sbatch_on_path(standin_path, monkeypatch, count_var):
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv(count_var, "2")
    slurm = load_system("slurm")
    assert choose_backend(slurm, "auto", nodes=2) == "local"
    with pytest.raises(
        SubmitError,
        match=r"^nodes 3 does not fit the slurm allocation this "
        r"process runs in \(77: 2 nodes\); .* second sbatch\. Ask for nodes <= 2",
    ):
        choose_backend(slurm, "auto", nodes=3)


def test_submit_in_a_small_allocation_refuses_before_making_a_run_directory_standin_qsub(
    standin_path, monkeypatch, tmp_path, isolated_runs
):
    pbs_allocation(monkeypatch, tmp_path, ["x4000c0s0b0n0"])
    spec = JobSpec(system="aurora", nodes=2, ranks_per_node=12, account="P")
    with pytest.raises(SubmitError, match=r"^nodes 2 does not fit the pbs allocation"):
        submit(spec)
    assert not isolated_runs.exists() or not any(isolated_runs.iterdir())


def test_explicit_local_backend_also_checks_the_allocation_size_standin_qsub(
    standin_path, monkeypatch, tmp_path, isolated_runs
):
    pbs_allocation(monkeypatch, tmp_path, ["x4000c0s0b0n0"])
    spec = JobSpec(system="aurora", nodes=2, ranks_per_node=12, account="P")
    with pytest.raises(SubmitError, match=r"^nodes 2 does not fit the pbs allocation"):
        submit(spec, backend="local")
    (run,) = isolated_runs.iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["state"] == "FAILED" and manifest["backend"] == "local"
    assert "exit_code" not in {p.name for p in run.iterdir()}  # nothing was started
