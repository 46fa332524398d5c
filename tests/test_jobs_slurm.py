"""The Slurm and PBS backends against a real Slurm on localhost (tests/slurm_cluster.py).

The PBS tests go through Debian's slurm-wlm-torque wrappers (Torque-style qsub/qstat/qdel over
Slurm): they exercise the kit's PBS client path, not a PBS Pro server. Their system record is a
stand-in ("pbs-over-slurm": PBS directives, Hydra launcher) written by the test.

Fault tests (controller down and back, SIGKILL, walltime, requeue) gate their jobs on named
pipes (tests/gates.py) and keep their run directories in test-artifacts/runs/.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest

from hpcprof_kit.cli import main as cli_main
from hpcprof_kit.jobs import JobSpec, submit

from gates import Gate
from slurm_cluster import _until  # the tests' one poll of an answer until it is reached

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


def tiny(system: str, *command: str, **fields) -> JobSpec:
    fields = {"ranks_per_node": 1, "binding": "none", **fields}
    return JobSpec(system=system, command=list(command), **fields)


def test_slurm_job_completes_through_sbatch_and_srun(cluster_env):
    # One write per line (os.write): the two ranks share stdout, and a print's pieces may mix.
    probe = ("import os; os.write(1, (os.environ['SLURM_JOB_ID'] + ' ' + "
             "os.environ['HPCPROF_RUN_DIR'] + '\\n').encode())")  # fmt: skip
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
    assert job.exit_code == 7  # srun passes the task's exit code on; the script exits with it
    assert "no such input" in job.tail(stream="stderr")


def test_slurm_job_cancelled_while_running(cluster_env, tmp_path):
    gate = Gate(tmp_path)
    job = submit(tiny("slurm", *gate.command()), backend="slurm")
    gate.wait_started()
    assert job.state == "RUNNING"
    assert job.cancel() == "CANCELLED"
    assert job.manifest["state"] == "CANCELLED"
    # scancel's SIGTERM reached the batch script, which named it in its own record.
    end = json.loads((job.run_dir / "job_end.json").read_text())
    assert (end["exit_code"], end["signal"]) == (143, 15)


def test_slurm_state_read_back_from_completion_records(cluster_env):
    # After scontrol forgets a job, the jobcomp/filetxt record still gives state and exit code.
    from hpcprof_kit.jobs.backends.slurm import SlurmBackend

    job = submit(tiny("slurm", "true"), backend="slurm")
    assert job.wait(timeout=60, progress=False) == "COMPLETED"
    record = SlurmBackend()._completion_record(job.job_id)
    assert record["JobState"] == "COMPLETED" and record["ExitCode"] == "0:0"


def test_controller_down_then_back_keeps_each_job_and_finds_its_true_end(
    cluster_env, kept_runs, tmp_path
):
    ok_gate, bad_gate = Gate(tmp_path, "ok"), Gate(tmp_path, "bad")
    ok = submit(tiny("slurm", *ok_gate.command("exit 0")), backend="slurm")
    bad = submit(tiny("slurm", *bad_gate.command("exit 3")), backend="slurm")
    ok_gate.wait_started()
    bad_gate.wait_started()
    assert (ok.state, bad.state) == ("RUNNING", "RUNNING")
    for job in (ok, bad):
        job.backend.command_timeout = 3.0  # a hung squeue counts as "not answering" sooner
    with cluster_env.controller_down():
        assert ok.refresh() == "RUNNING"  # not FAILED: Slurm did not say so
        note = ok.manifest["note"]
        assert note.startswith(f"scheduler not answering since {ok.manifest['silent_since']} (")
        ok_gate.release()
        bad_gate.release()
        # The job's own record of a failure needs no scheduler.
        assert bad.wait(timeout=120, progress=False) == "FAILED"
        assert bad.exit_code == 3
        # An exit 0 is confirmed by Slurm (a SIGTERM-killed script records 0 too).
        assert (ok.refresh(), ok.manifest["note"]) == ("RUNNING", note)
    assert ok.wait(timeout=300, progress=False) == "COMPLETED"  # slurmd reports the end late
    assert ok.exit_code == 0
    assert (ok.manifest["note"], ok.manifest["silent_since"]) == ("", None)


def _batch_script(job_id: str) -> psutil.Process:
    """The batch shell slurmd started for the job."""
    for proc in psutil.process_iter(["cmdline", "environ"]):
        env, cmd = proc.info["environ"] or {}, proc.info["cmdline"] or []
        if env.get("SLURM_JOB_ID") == job_id and cmd[-1:] and cmd[-1].endswith("slurm_script"):
            return proc
    raise AssertionError(f"no batch script of job {job_id} among the processes")


def test_slurm_job_killed_by_sigkill_fails_with_the_signal(cluster_env, kept_runs, tmp_path):
    gate = Gate(tmp_path)
    job = submit(tiny("slurm", *gate.command()), backend="slurm")
    gate.wait_started()
    _batch_script(job.job_id).kill()  # SIGKILL: no trap runs, the job records nothing
    assert job.wait(timeout=60, progress=False) == "FAILED"
    assert (job.exit_code, job.manifest["note"]) == (137, "killed by signal 9 (SIGKILL)")
    assert not (job.run_dir / "job_end.json").exists()


def test_slurm_task_killed_by_sigkill_fails_with_the_signal(cluster_env, kept_runs):
    job = submit(tiny("slurm", "bash", "-c", "kill -KILL $$"), backend="slurm")
    assert job.wait(timeout=60, progress=False) == "FAILED"
    assert job.exit_code == 137  # srun says 128 + 9; the script exits with it and records it
    assert job.manifest["note"] == "exit code 137: killed by signal 9 (SIGKILL)"


def test_slurm_job_over_its_walltime_times_out(cluster_env, kept_runs, tmp_path):
    gate = Gate(tmp_path)
    # Slurm counts walltime in whole minutes: the shortest is one.
    job = submit(tiny("slurm", *gate.command(), walltime="00:01:00"), backend="slurm")
    gate.wait_started()
    assert job.wait(timeout=300, progress=False) == "TIMEOUT"
    assert job.manifest["note"] == "the walltime ran out"
    # Slurm's SIGTERM ended the step's task; the script exited with srun's 128 + 15 and said so.
    end = json.loads((job.run_dir / "job_end.json").read_text())
    assert end["exit_code"] == 143


def test_slurm_job_requeued_runs_again_and_then_completes(cluster_env, kept_runs, tmp_path):
    first, second = Gate(tmp_path, "first"), Gate(tmp_path, "second")
    # The first run waits on the first gate; the run after the requeue on the second.
    script = (
        'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then s=$0 g=$1; else s=$2 g=$3; fi; '
        'echo started > "$s"; read -r _ < "$g"'
    )
    fifos = [str(p) for p in (first.started, first.go, second.started, second.go)]
    job = submit(tiny("slurm", "bash", "-c", script, *fifos), backend="slurm")
    first.wait_started()
    cluster_env.run("scontrol", "requeue", job.job_id)
    # Completing its first run or queued again, never final: that run's end is not the job's.
    assert job.state in ("RUNNING", "QUEUED")
    cluster_env.wait_state(job.job_id, "PENDING")
    assert job.state == "QUEUED"
    # Slurm holds a requeued job back two minutes; let it start again now.
    cluster_env.run("scontrol", "update", f"JobId={job.job_id}", "StartTime=now")
    second.wait_started()
    assert job.state == "RUNNING"
    second.release()
    assert job.wait(timeout=120, progress=False) == "COMPLETED"
    assert job.exit_code == 0


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


def test_pbs_backend_torque_wrappers_job_cancelled(torque_system, tmp_path):
    gate = Gate(tmp_path)
    job = submit(tiny(torque_system, *gate.command()), backend="pbs")
    gate.wait_started()
    assert job.state == "RUNNING"
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


def test_scancel_refused_while_the_controller_is_down_is_no_cancel(
    cluster_env, kept_runs, tmp_path, capsys
):
    """The Slurm counterpart of cases.md rows 53-54: scancel fails with the controller down,
    the job runs on and ends 0; the kit says COMPLETED and keeps what scancel said."""
    gate = Gate(tmp_path)
    job = submit(tiny("slurm", *gate.command("exit 0")), backend="slurm")
    gate.wait_started()
    assert job.state == "RUNNING"
    job.backend.command_timeout = 3.0  # a hung squeue counts as "not answering" sooner
    with cluster_env.controller_down():
        assert cli_main(["cancel", str(job.run_dir)]) == 2
        err = capsys.readouterr().err
        cancel = job.manifest["cancel"]
        assert (cancel["command"], cancel["accepted"]) == (f"scancel {job.job_id}", False)
        assert cancel["exit_code"] != 0 and cancel["said"] == (
            f"scancel: error: Kill job error on job id {job.job_id}: Unable to contact slurm "
            "controller (connect failure)"
        )
        assert f"{cancel['text']}. The job was not cancelled: it runs on" in err
        gate.release()
        appeared, _ = _until((job.run_dir / "job_end.json").exists, bool, 120, interval=0.05)
        assert appeared, "the job never wrote its record"
    assert job.wait(timeout=300, progress=False) == "COMPLETED"  # slurmd reports the end late
    assert (job.exit_code, job.manifest["note"]) == (0, "")
    assert cli_main(["status", str(job.run_dir)]) == 0
    assert cancel["text"] in capsys.readouterr().out.splitlines()
