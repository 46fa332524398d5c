"""The Slurm and PBS backends against a real Slurm on localhost (tests/slurm_cluster.py).

The PBS tests go through Debian's slurm-wlm-torque wrappers (Torque-style qsub/qstat/qdel over
Slurm): they exercise the kit's PBS client path, not a PBS Pro server. Their system record is a
stand-in ("pbs-over-slurm": PBS directives, Hydra launcher) written by the test.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hpcprof_kit.jobs import JobSpec, submit

pytestmark = pytest.mark.slurm

TORQUE_RECORD = """\
name = "pbs-over-slurm"
title = "Torque-style qsub/qstat/qdel over the test Slurm (not PBS Pro)"
scheduler = "pbs"
launcher = "hydra"
account_required = false
default_queue = "debug"
pbs_place = "scatter"
pbs_select_suffix = ""
pbs_keep = "doe"
[topology]
sockets = 0
cores_per_socket = 0
threads_per_core = 0
sibling_offset = 0
gpus = 0
[queues.debug]
min_nodes = 1
max_nodes = 1
max_walltime = "00:10:00"
[environment]
setup = []
[environment.vars]
"""


@pytest.fixture
def cluster_env(slurm_cluster, monkeypatch):
    for key, value in slurm_cluster.env.items():
        if key in ("SLURM_CONF", "PATH"):
            monkeypatch.setenv(key, value)
    return slurm_cluster


def until_running(job, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while job.state == "QUEUED" and time.monotonic() < deadline:
        time.sleep(0.3)
    return job.state


def tiny(system: str, *command: str, **fields) -> JobSpec:
    fields = {"ranks_per_node": 1, "binding": "none", **fields}
    return JobSpec(system=system, command=list(command), **fields)


def test_slurm_job_completes_through_sbatch_and_srun(cluster_env):
    probe = "import os; print(os.environ['SLURM_JOB_ID'], os.environ['HPCPROF_RUN_DIR'])"
    job = submit(tiny("slurm", "python3", "-c", probe, ranks_per_node=2), backend="auto")
    assert job.backend.name == "slurm" and job.job_id.isdigit()
    assert job.wait(timeout=60, progress=False) == "COMPLETED"
    assert job.exit_code == 0
    lines = job.tail().splitlines()
    assert lines == [f"{job.job_id} {job.run_dir}"] * 2  # two ranks from srun
    assert job.manifest["hosts"] == ["localhost"]


def test_slurm_job_fails_with_its_stderr(cluster_env):
    job = submit(tiny("slurm", "bash", "-c", "echo 'no such input' >&2; exit 7"), backend="slurm")
    assert job.wait(timeout=60, progress=False) == "FAILED"
    assert job.exit_code == 7 or job.exit_code == 1  # srun reports the task's code or 1
    assert "no such input" in job.tail(stream="stderr")


def test_slurm_job_cancelled_while_running(cluster_env):
    job = submit(tiny("slurm", "sleep", "120"), backend="slurm")
    assert until_running(job) == "RUNNING"
    assert job.cancel() == "CANCELLED"
    assert job.manifest["state"] == "CANCELLED"


def test_slurm_state_read_back_from_completion_records(cluster_env):
    # After scontrol forgets a job, the jobcomp/filetxt record still gives state and exit code.
    from hpcprof_kit.jobs.backends.slurm import SlurmBackend

    job = submit(tiny("slurm", "true"), backend="slurm")
    assert job.wait(timeout=60, progress=False) == "COMPLETED"
    record = SlurmBackend()._completion_record(job.job_id)
    assert record["JobState"] == "COMPLETED" and record["ExitCode"] == "0:0"


@pytest.fixture
def torque_system(cluster_env, tmp_path, monkeypatch):
    folder = tmp_path / "systems"
    folder.mkdir()
    (folder / "pbs-over-slurm.toml").write_text(TORQUE_RECORD)
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(folder))
    return "pbs-over-slurm"


def test_pbs_backend_torque_wrappers_job_completes(torque_system):
    spec = tiny(torque_system, "python3", "-c", "import os; print(os.environ['HPCPROF_SYSTEM'])")
    script = spec.render()
    assert "#PBS -l select=1\n" in script and "#PBS -q debug\n" in script
    job = submit(spec, backend="auto")
    assert job.backend.name == "pbs"
    assert job.wait(timeout=60, progress=False) == "COMPLETED"
    assert job.tail() == "pbs-over-slurm"
    assert Path(job.manifest["run_dir"]) == job.run_dir


def test_pbs_backend_torque_wrappers_job_cancelled(torque_system):
    job = submit(tiny(torque_system, "sleep", "120"), backend="pbs")
    assert until_running(job) == "RUNNING"
    assert job.cancel() == "CANCELLED"


def test_pbs_pro_attributes_give_exit_and_timeout_states():
    from hpcprof_kit.jobs.backends.pbs import state_from_attributes

    finished = {"job_state": "F", "Exit_status": "3", "exec_host": "x1000c0s0b0n0/0*8"}
    assert state_from_attributes(finished, cancelled=False).state == "FAILED"
    assert state_from_attributes(finished, cancelled=False).hosts == ("x1000c0s0b0n0",)
    walltime = {"job_state": "F", "Exit_status": "-29"}
    assert state_from_attributes(walltime, cancelled=False).state == "TIMEOUT"
    assert state_from_attributes({"job_state": "R"}, cancelled=False).state == "RUNNING"
    assert (
        state_from_attributes({"job_state": "F", "Exit_status": "271"}, True).state == "CANCELLED"
    )


def test_fixture_cleans_scheduler_variables(slurm_cluster):
    assert "SLURM_JOB_ID" not in slurm_cluster.env and os.path.isfile(slurm_cluster.conf)
