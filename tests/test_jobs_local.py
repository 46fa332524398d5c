"""The local backend: real detached jobs reaching COMPLETED, FAILED, CANCELLED and TIMEOUT,
re-attached from another process, in run directories that are never reused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from hpcprof_kit.errors import SpecError, SubmitError
from hpcprof_kit.jobs import Job, JobSpec, submit


def tiny(*command: str, **fields) -> JobSpec:
    return JobSpec(
        system="local", ranks_per_node=1, binding="none", command=list(command), **fields
    )


def test_local_job_completes_with_run_directory_and_manifest(isolated_runs):
    job = submit(
        tiny("python3", "-c", "import os; print('run dir', os.environ['HPCPROF_RUN_DIR'])")
    )
    assert job.wait(timeout=60, progress=False) == "COMPLETED"
    assert job.exit_code == 0
    assert job.tail() == f"run dir {job.run_dir}"
    assert job.run_dir.parent == isolated_runs.resolve()
    assert sorted(p.name for p in job.run_dir.iterdir()) == [
        "exit_code", "job.sh", "job_end.json", "manifest.json", "nodefile", "spec.json",
        "stderr", "stdout", "tables", "timings", "traces",
    ]  # fmt: skip
    # The script records its own end, so every backend can give the same answer.
    assert json.loads((job.run_dir / "job_end.json").read_text())["exit_code"] == 0
    manifest = json.loads((job.run_dir / "manifest.json").read_text())
    assert manifest["state"] == "COMPLETED" and manifest["backend"] == "local"
    assert manifest["job_id"] == job.job_id and job.job_id.startswith("local-")
    assert manifest["hosts"] == [os.uname().nodename]
    assert (job.run_dir / "job.sh").read_text() == JobSpec.from_json(
        (job.run_dir / "spec.json").read_text()
    ).render()


def test_local_job_fails_and_keeps_its_stderr():
    job = submit(tiny("python3", "-c", "import sys; print('partial'); sys.exit('bad input: 42')"))
    assert job.wait(timeout=60, progress=False) == "FAILED"
    assert job.exit_code == 1
    assert job.tail(stream="stderr") == "bad input: 42"
    assert job.tail() == "partial"


def test_local_job_cancelled_while_running():
    job = submit(tiny("bash", "-c", "echo started; sleep 60"))
    deadline = time.monotonic() + 10
    while not job.tail().startswith("started") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job.state == "RUNNING"
    t0 = time.monotonic()
    assert job.cancel() == "CANCELLED"
    assert time.monotonic() - t0 < 10
    assert job.tail(100).splitlines()[0] == "started"  # output before the cancel is kept
    assert job.manifest["state"] == "CANCELLED"


def test_local_job_past_its_walltime_ends_in_timeout():
    job = submit(tiny("sleep", "60", walltime="00:00:02"))
    assert job.wait(timeout=30, progress=False) == "TIMEOUT"
    assert job.exit_code == 124
    assert job.manifest["note"] == "the walltime ran out"


def test_reattach_from_another_process_sees_the_end():
    job = submit(tiny("bash", "-c", "sleep 1; echo done"))
    # A fresh process (as after a kernel restart) polls the same run directory.
    cmd = [sys.executable, "-m", "hpcprof_kit", "status", str(job.run_dir), "--json"]
    first = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    assert first["state"] == "RUNNING" and first["job_id"] == job.job_id
    again = Job.from_run_dir(job.run_dir)
    assert again.wait(timeout=30, progress=False) == "COMPLETED"
    last = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    assert (last["state"], last["exit_code"]) == ("COMPLETED", 0)


def test_two_submissions_in_one_second_get_distinct_run_directories():
    jobs = [submit(tiny("true")) for _ in range(3)]
    names = [j.run_dir.name for j in jobs]
    assert len(set(names)) == 3
    stems = {n.rsplit("_", 1)[0] for n in names}
    assert stems == {"train_local_N1_R1"}
    for job in jobs:
        assert job.wait(timeout=30, progress=False) == "COMPLETED"


def test_bad_spec_makes_no_run_directory(isolated_runs):
    with pytest.raises(SpecError, match="nodes 2 is outside"):
        submit(tiny("true", nodes=2))
    assert not isolated_runs.exists() or not any(isolated_runs.iterdir())


def test_missing_qsub_names_the_backend_and_offers_local(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    for var in ("PBS_NODEFILE", "PBS_JOBID"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(SubmitError) as info:
        submit(JobSpec(system="aurora", account="P"))
    message = str(info.value)
    assert "backend 'pbs' was expected for system aurora" in message
    assert "qsub is not on PATH" in message and "backend='local'" in message


def test_local_backend_for_pbs_system_needs_an_allocation(monkeypatch):
    for var in ("PBS_NODEFILE", "PBS_JOBID"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(SubmitError, match="not inside a pbs allocation"):
        submit(JobSpec(system="polaris", account="P"), backend="local")


@pytest.mark.mpi
def test_real_two_rank_train_example_through_mpiexec(mpiexec):
    pytest.importorskip("hpcprof_kit.apps.train", reason="the train app is not written yet")
    job = submit(JobSpec(system="local", example="train", ranks_per_node=2, binding="none"))
    state = job.wait(timeout=180, progress=False)
    assert state == "COMPLETED", job.tail(40, "stderr")
    timings = sorted(p.name for p in (job.run_dir / "timings").iterdir())
    assert timings == ["train-0-of-2.json", "train-1-of-2.json"]


def test_a_process_ending_while_its_stat_is_read_counts_as_gone(monkeypatch):
    """Cancel polls /proc/<pid>/stat; a process that ends between the open and the read makes
    the read fail with ESRCH, which must mean "gone", not an error in the notebook."""
    from pathlib import Path

    from hpcprof_kit.jobs.backends import local

    def ended(self, *args, **kwargs):
        raise ProcessLookupError(3, "No such process")

    assert local._alive(os.getpid()) is True
    monkeypatch.setattr(Path, "read_text", ended)
    assert local._alive(os.getpid()) is False
