"""The local backend: real detached jobs reaching COMPLETED, FAILED, CANCELLED, TIMEOUT and
LOST, re-attached from another process, in run directories that are never reused. Jobs are
gated on named pipes (tests/gates.py), never on sleeps."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import warnings
from datetime import datetime

import psutil
import pytest

from hpcprof_kit.errors import SpecError, SubmitError
from hpcprof_kit.jobs import Job, JobSpec, RunDir, submit
from hpcprof_kit.jobs.backends.local import LocalBackend

from gates import Gate


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
        ".manifest.lock", "exit_code", "job.sh", "job_end.json", "manifest.json", "nodefile",
        "spec.json", "stderr", "stdout", "tables", "timings", "traces",
    ]  # fmt: skip
    # The script records its own end, so every backend can give the same answer.
    assert json.loads((job.run_dir / "job_end.json").read_text())["exit_code"] == 0
    manifest = json.loads((job.run_dir / "manifest.json").read_text())
    assert manifest["state"] == "COMPLETED" and manifest["backend"] == "local"
    assert manifest["job_id"] == job.job_id and job.job_id.startswith("local-")
    assert manifest["hosts"] == [os.uname().nodename]
    # What proves the process is the job: its pid, start time and run directory.
    assert manifest["process"]["pid"] == int(job.job_id.split("-")[1])
    assert manifest["process"]["run_dir"] == str(job.run_dir)
    assert isinstance(manifest["process"]["start_time"], float)
    assert (job.run_dir / "job.sh").read_text() == JobSpec.from_json(
        (job.run_dir / "spec.json").read_text()
    ).render()


def test_local_job_fails_and_keeps_its_stderr():
    job = submit(tiny("python3", "-c", "import sys; print('partial'); sys.exit('bad input: 42')"))
    assert job.wait(timeout=60, progress=False) == "FAILED"
    assert job.exit_code == 1
    assert job.tail(stream="stderr") == "bad input: 42"
    assert job.tail() == "partial"


def test_local_job_cancelled_while_running(tmp_path):
    gate = Gate(tmp_path)
    job = submit(tiny(*gate.command("echo never")))
    gate.wait_started()
    assert job.state == "RUNNING"
    assert job.cancel() == "CANCELLED"
    assert "never" not in job.tail()
    assert job.manifest["state"] == "CANCELLED"
    assert job.exit_code == 143  # the wrapper's timeout passed SIGTERM on
    # The script's own record names the signal that ended it; the cancel decides the state.
    end = json.loads((job.run_dir / "job_end.json").read_text())
    assert (end["exit_code"], end["signal"]) == (143, 15)


def test_local_job_past_its_walltime_ends_in_timeout():
    job = submit(tiny("sleep", "60", walltime="00:00:02"))
    assert job.wait(timeout=30, progress=False) == "TIMEOUT"
    assert job.exit_code == 124
    assert job.manifest["note"] == "the walltime ran out"
    # The walltime's SIGTERM reached the script, which recorded it; TIMEOUT still wins.
    end = json.loads((job.run_dir / "job_end.json").read_text())
    assert (end["exit_code"], end["signal"]) == (143, 15)


def test_reattach_from_another_process_sees_the_end(tmp_path):
    gate = Gate(tmp_path)
    job = submit(tiny(*gate.command("echo done")))
    gate.wait_started()
    # A fresh process (as after a kernel restart) polls the same run directory.
    cmd = [sys.executable, "-m", "hpcprof_kit", "status", str(job.run_dir), "--json"]
    first = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    assert first["state"] == "RUNNING" and first["job_id"] == job.job_id
    gate.release()
    again = Job.from_run_dir(job.run_dir)
    assert again.wait(timeout=30, progress=False) == "COMPLETED"
    last = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    assert (last["state"], last["exit_code"]) == ("COMPLETED", 0)


KERNEL = """
import sys
import warnings
from hpcprof_kit.jobs import JobSpec, submit
job = submit(JobSpec(system="local", ranks_per_node=1, binding="none", command=sys.argv[1:]))
print(job.run_dir, flush=True)
job.wait(progress=False)
"""


def test_kernel_killed_mid_wait_then_reattach_finds_the_true_end(tmp_path):
    gate = Gate(tmp_path)
    kernel = subprocess.Popen(
        [sys.executable, "-c", KERNEL, *gate.command("echo finished; exit 5")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    run_dir = kernel.stdout.readline().strip()
    gate.wait_started()
    kernel.kill()  # the kernel dies while it waits; the job, in its own session, runs on
    kernel.wait()
    kernel.stdout.close()
    gate.release()
    job = Job.from_run_dir(run_dir)
    assert job.wait(timeout=30, progress=False) == "FAILED"
    assert (job.exit_code, job.tail()) == (5, "finished")


def _job_processes(job: Job) -> list[psutil.Process]:
    wrapper = psutil.Process(job.manifest["process"]["pid"])
    return [wrapper, *wrapper.children(recursive=True)]


def test_job_killed_by_sigkill_fails_with_the_signal_named(tmp_path):
    gate = Gate(tmp_path)
    job = submit(tiny(*gate.command("exit 0")))
    gate.wait_started()
    script = next(p for p in _job_processes(job) if p.cmdline() == ["bash", "job.sh"])
    script.send_signal(signal.SIGKILL)  # as the OOM killer would
    gate.release()  # the launcher under the killed script ends too
    assert job.wait(timeout=30, progress=False) == "FAILED"
    assert job.exit_code == 137
    assert job.manifest["note"] == "exit code 137: killed by signal 9 (SIGKILL)"
    assert not (job.run_dir / "job_end.json").exists()  # a killed script records nothing


def test_the_record_is_written_even_when_the_schedulers_sigterm_kills_every_child(
    tmp_path, monkeypatch
):
    # Seen on Slurm at the walltime: the script's EXIT trap had written .job_end.part when the
    # job-wide SIGTERM killed its `mv` ("Terminated"), and job_end.json never appeared. Here
    # stand-in `date` and `mv` die of SIGTERM as soon as they start, as they did there.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("date", "mv"):
        (bin_dir / tool).write_text('#!/bin/sh\nkill -TERM "$$"\n')
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    job = submit(tiny("true"))
    assert job.wait(timeout=60, progress=False) == "COMPLETED"
    record = json.loads((job.run_dir / "job_end.json").read_text())
    assert record["exit_code"] == 0
    # ISO 8601 with the UTC offset, as `date -Iseconds` wrote it before
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", record["ended_at"])
    assert datetime.fromisoformat(record["ended_at"]).utcoffset() is not None


def test_job_whose_processes_vanished_without_a_record_is_lost(tmp_path):
    gate = Gate(tmp_path)
    job = submit(tiny(*gate.command("exit 0")))
    gate.wait_started()
    pid = job.manifest["process"]["pid"]
    victims = _job_processes(job)
    for proc in victims:  # as a reboot would: nothing of the job gets to record its end
        proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(victims, timeout=30)
    assert job.wait(timeout=30, progress=False) == "LOST"
    note = job.manifest["note"]
    assert note.startswith(f"its process (pid {pid}, started ")
    assert note.endswith(" is gone and left no exit record (exit_code, job_end.json)")
    assert job.exit_code is None
    with pytest.raises(SubmitError, match=r"cannot cancel local-\d+ \(.*\): LOST, its process"):
        job.cancel()


@pytest.fixture
def unrelated_session():
    """A process the test owns, leading its own session with a child, as any login shell."""
    proc = subprocess.Popen(
        ["bash", "-c", "sleep 600 & echo ready; wait"], start_new_session=True,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout.readline() == "ready\n"  # its child runs now
    leader = psutil.Process(proc.pid)
    yield leader
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()


def test_pid_reused_by_an_unrelated_process_is_never_signalled(tmp_path, unrelated_session):
    # A run directory from before a restart: its manifest names a pid that now belongs to
    # an unrelated session leader, and the job left no exit record.
    run = RunDir.create(tiny("true"))
    (run.path / "nodefile").write_text("localhost\n")
    old_start = unrelated_session.create_time() - 3600
    run.update(backend="local", job_id=f"local-{unrelated_session.pid}", state="RUNNING",
               process={"pid": unrelated_session.pid, "start_time": old_start,
                        "run_dir": str(run.path)})  # fmt: skip
    members = [unrelated_session, *unrelated_session.children()]
    assert len(members) == 2

    with pytest.raises(SubmitError) as refused:
        LocalBackend().cancel(run.path, f"local-{unrelated_session.pid}")
    assert "now belongs to another process (bash -c sleep 600 & echo ready; wait, started " in str(
        refused.value
    )
    assert str(refused.value).endswith("so nothing was signalled")

    job = Job.from_run_dir(run.path)
    with pytest.raises(SubmitError, match=f"pid {unrelated_session.pid} now belongs to another"):
        job.cancel()
    assert job.state == "LOST"
    assert all(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in members)
    assert not (run.path / "cancel_requested").exists()


def test_a_run_from_before_start_times_is_proven_only_by_its_wrapper(tmp_path):
    from hpcprof_kit.jobs.backends.identity import ProcessIdentity

    def started(argv0: str) -> subprocess.Popen:
        return subprocess.Popen(
            ["bash", "-c", "read -r _", argv0], cwd=tmp_path, stdin=subprocess.PIPE
        )

    wrapper, other = started("hpcprof-local-job"), started("my-shell")
    try:
        assert ProcessIdentity(wrapper.pid, None, str(tmp_path)).prove()[0] is not None
        proc, why = ProcessIdentity(other.pid, None, str(tmp_path)).prove()
        assert proc is None
        assert why.startswith(
            f"pid {other.pid} cannot be proven to be the job (this run recorded no start time"
        )
        assert ProcessIdentity(wrapper.pid, None, "/elsewhere").prove()[0] is None
    finally:
        for proc in (wrapper, other):
            proc.communicate(b"\n", timeout=30)


def test_two_submissions_in_one_second_get_distinct_run_directories():
    jobs = [submit(tiny("true")) for _ in range(3)]
    names = [j.run_dir.name for j in jobs]
    assert len(set(names)) == 3
    stems = {n.rsplit("_", 1)[0] for n in names}
    assert stems == {"true_local_N1_R1"}  # a custom command names its run after its program
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


def test_ncu_job_without_a_kernel_filter_is_warned_before_submission(monkeypatch, tmp_path):
    from hpcprof_kit.errors import KitWarning

    monkeypatch.setenv("PATH", str(tmp_path))  # no qsub: the warning must come before it is asked
    for var in ("PBS_NODEFILE", "PBS_JOBID"):
        monkeypatch.delenv(var, raising=False)
    spec = JobSpec(system="polaris", account="P", ranks_per_node=4, tracer="ncu")
    no_qsub = pytest.raises(SubmitError, match="qsub is not on PATH")
    with pytest.warns(KitWarning, match="ncu job with no kernel filter"), no_qsub:
        submit(spec)
    with warnings.catch_warnings(), pytest.raises(SubmitError, match="qsub is not on PATH"):
        warnings.simplefilter("error", KitWarning)  # one kernel named: no warning
        submit(spec.with_(env={"NCU_KERNEL": "ampere_sgemm_128x128_tn"}))
