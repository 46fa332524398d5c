"""Every scheduler state and exit status maps to a kit state, and the job's own record and the
scheduler's word combine into one: tables checked row by row, and the Slurm/PBS clients driven
through stand-in commands that answer, fail or hang as a real scheduler can."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hpcprof_kit.jobs import Job, RunDir
from hpcprof_kit.jobs.backends import STATES, SchedulerNotAnswering, Status
from hpcprof_kit.jobs.backends.outcome import ENDED, JobEnd, judge
from hpcprof_kit.jobs.backends.pbs import (
    JOB_EXEC_CODES,
    PBS_STATES,
    PbsBackend,
    from_exit_status,
    state_from_attributes,
)
from hpcprof_kit.jobs.backends.slurm import SLURM_STATES, SlurmBackend, state_from_fields

# squeue(1), "JOB STATE CODES": every state squeue can print.
SQUEUE_STATES = [
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "CONFIGURING",
    "COMPLETING",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PENDING",
    "PREEMPTED",
    "RUNNING",
    "RESV_DEL_HOLD",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "REQUEUED",
    "RESIZING",
    "REVOKED",
    "SIGNALING",
    "SPECIAL_EXIT",
    "STAGE_OUT",
    "STOPPED",
    "SUSPENDED",
    "TIMEOUT",
]


@pytest.mark.parametrize("raw", SQUEUE_STATES)
def test_every_slurm_state_maps_to_a_kit_state(raw):
    status = state_from_fields({"JobState": raw, "ExitCode": "0:0"})
    assert status.state in STATES
    assert (status.state, status.note) == SLURM_STATES[raw]


@pytest.mark.parametrize(
    ("raw", "state"),
    [("REQUEUED", "QUEUED"), ("REQUEUE_HOLD", "QUEUED"), ("SUSPENDED", "QUEUED"),
     ("SIGNALING", "RUNNING"), ("STOPPED", "RUNNING"), ("NODE_FAIL", "FAILED"),
     ("OUT_OF_MEMORY", "FAILED"), ("DEADLINE", "TIMEOUT")],
)  # fmt: skip
def test_slurm_states_the_kit_once_called_failed(raw, state):
    assert state_from_fields({"JobState": raw}).state == state


def test_preempted_is_queued_when_requeued_and_cancelled_when_not():
    requeued = state_from_fields({"JobState": "PREEMPTED", "Requeue": "1"})
    assert (requeued.state, requeued.note) == ("QUEUED", "preempted; Slurm requeues it")
    gone = state_from_fields({"JobState": "PREEMPTED", "Requeue": "0"})
    assert (gone.state, gone.note) == ("CANCELLED", "preempted by another job and not requeued")


def test_slurm_signal_is_named_and_an_unknown_state_is_not_guessed():
    killed = state_from_fields({"JobState": "FAILED", "ExitCode": "0:9"})
    assert (killed.exit_code, killed.note) == (137, "killed by signal 9 (SIGKILL)")
    sacct = state_from_fields({"JobState": "CANCELLED by 0", "ExitCode": "0:15"})
    assert sacct.state == "CANCELLED"
    with pytest.raises(SchedulerNotAnswering) as info:
        state_from_fields({"JobState": "HIBERNATING"})
    assert info.value.what == "state unknown"
    assert "'HIBERNATING', which the kit does not map" in info.value.detail


@pytest.mark.parametrize(
    ("code", "state", "note"),
    [(0, "COMPLETED", ""), (3, "FAILED", ""),
     (137, "FAILED", "exit code 137: killed by signal 9 (SIGKILL)"),
     (265, "FAILED", "Exit_status 265: killed by signal 9 (SIGKILL)"),
     (271, "FAILED", "Exit_status 271: killed by signal 15 (SIGTERM)"),
     (-29, "TIMEOUT", "Exit_status -29: JOB_EXEC_KILL_WALLTIME: the walltime ran out"),
     (-27, "FAILED", "Exit_status -27: JOB_EXEC_KILL_MEM: killed for exceeding its mem (out of memory)"),
     (-1, "FAILED", "Exit_status -1: JOB_EXEC_FAIL1: the job could not start (before its files were staged)"),
     (-99, "FAILED", "Exit_status -99: an unlisted JOB_EXEC code")],
)  # fmt: skip
def test_pbs_exit_statuses(code, state, note):
    assert (from_exit_status(code).state, from_exit_status(code).note) == (state, note)


def test_every_pbs_state_letter_and_job_exec_code_maps():
    for letter in PBS_STATES:
        status = state_from_attributes({"job_state": letter, "Exit_status": "0"})
        assert status.state in STATES
    for code in JOB_EXEC_CODES:
        assert from_exit_status(code).state in ("FAILED", "TIMEOUT")
    unknown = {"job_state": "Z"}
    with pytest.raises(SchedulerNotAnswering, match="job_state 'Z', which the kit does not map"):
        state_from_attributes(unknown)


def test_pbs_finished_without_exit_status_is_never_completed_on_its_own():
    ended = state_from_attributes({"job_state": "C"})
    assert ended.state == ENDED
    assert judge(None, ended, cancelled=False).state == "LOST"
    assert judge(JobEnd(0), ended, cancelled=False).state == "COMPLETED"
    assert judge(JobEnd(2), ended, cancelled=False).exit_code == 2


FORGOT = Status(ENDED, note="Slurm no longer knows job 7")


@pytest.mark.parametrize(
    ("record", "answer", "cancelled", "state", "code"),
    [
        (None, Status("RUNNING"), False, "RUNNING", None),
        (JobEnd(3), Status("RUNNING"), False, "FAILED", 3),  # the scheduler lags
        (JobEnd(0), Status("RUNNING"), False, "RUNNING", None),  # 0 waits for confirmation
        (JobEnd(143), Status("RUNNING"), False, "RUNNING", None),  # a signal: ask why
        (JobEnd(0), Status("QUEUED"), False, "QUEUED", None),  # requeued: an earlier run's
        (JobEnd(0), Status("TIMEOUT", 143), False, "TIMEOUT", 143),  # SIGTERM recorded as 0
        (JobEnd(0), Status("COMPLETED"), False, "COMPLETED", 0),
        (JobEnd(7), Status("FAILED"), False, "FAILED", 7),
        (JobEnd(0), Status("FAILED", 271), True, "CANCELLED", 271),
        (None, FORGOT, False, "LOST", None),
        (None, FORGOT, True, "CANCELLED", None),
        (JobEnd(0), FORGOT, False, "COMPLETED", 0),
        (JobEnd(0), FORGOT, True, "COMPLETED", 0),  # ran to its end: a cancel changes nothing
        (JobEnd(143, signal=15), FORGOT, True, "CANCELLED", 143),
        (JobEnd(137), FORGOT, False, "FAILED", 137),
        (JobEnd(143, signal=15), FORGOT, False, "FAILED", 143),  # no cause claimed
    ],
)
def test_record_and_scheduler_make_one_state(record, answer, cancelled, state, code):
    status = judge(record, answer, cancelled)
    assert (status.state, status.exit_code) == (state, code)


def test_a_forgotten_sigterm_names_its_possible_causes_and_claims_none():
    """Issue #49: a job the scheduler forgot (no accounting) whose record says SIGTERM."""
    status = judge(JobEnd(143, signal=15), FORGOT, cancelled=False)
    assert (status.state, status.exit_code, status.note) == (
        "FAILED", 143,
        "exit code 143, killed by signal 15 (SIGTERM) (job_end.json); the cause is unknown: "
        "Slurm no longer knows job 7, and a cancel, the time limit or the program itself "
        "exiting 143 all leave this record",
    )  # fmt: skip


def test_lost_names_what_is_missing():
    status = judge(None, FORGOT, cancelled=False)
    assert (
        status.note == "Slurm no longer knows job 7, and the job left no exit record (job_end.json)"
    )


# ---- the clients against stand-in commands -------------------------------------------------


def stand_in(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/bash\n{script}\n")
    path.chmod(0o755)


@pytest.fixture
def scheduler_bin(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


def run_dir_with(tmp_path: Path, record: dict | None) -> Path:
    run = tmp_path / "run"
    run.mkdir(parents=True)
    if record is not None:
        (run / "job_end.json").write_text(json.dumps(record))
    return run


DOWN = (
    'echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1'
)
FORGOTTEN = 'echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1'


def test_slurm_down_is_not_answering_unless_the_record_failed(tmp_path, scheduler_bin):
    for name in ("squeue", "scontrol"):
        stand_in(scheduler_bin, name, DOWN)
    with pytest.raises(SchedulerNotAnswering, match=r"squeue failed \(exit 1\): .*connect failure"):
        SlurmBackend().poll(run_dir_with(tmp_path / "a", None), "7")
    with pytest.raises(SchedulerNotAnswering):  # exit 0 needs Slurm's word
        SlurmBackend().poll(run_dir_with(tmp_path / "b", {"exit_code": 0}), "7")
    failed = SlurmBackend().poll(run_dir_with(tmp_path / "c", {"exit_code": 4}), "7")
    assert (failed.state, failed.exit_code, failed.note) == (
        "FAILED",
        4,
        "exit code from job_end.json",
    )


def test_slurm_command_that_hangs_is_not_answering(tmp_path, scheduler_bin):
    stand_in(scheduler_bin, "squeue", "exec sleep 30")
    backend = SlurmBackend()
    backend.command_timeout = 0.5
    with pytest.raises(SchedulerNotAnswering, match=r"squeue gave no answer in 0.5 s"):
        backend.poll(run_dir_with(tmp_path, None), "7")


def test_slurm_forgotten_job_without_record_is_lost(tmp_path, scheduler_bin):
    for name in ("squeue", "sacct"):
        stand_in(scheduler_bin, name, FORGOTTEN if name == "squeue" else "exit 0")
    stand_in(
        scheduler_bin, "scontrol", f'[ "$1" = show ] && [ "$2" = config ] && exit 0; {FORGOTTEN}'
    )
    status = SlurmBackend().poll(run_dir_with(tmp_path, None), "7")
    assert (status.state, status.note) == (
        "LOST", "Slurm no longer knows job 7, and the job left no exit record (job_end.json)",
    )  # fmt: skip


def test_pbs_server_down_is_not_answering_and_unknown_job_is_forgotten(tmp_path, scheduler_bin):
    stand_in(
        scheduler_bin,
        "qstat",
        'echo "Connection refused" >&2; echo "qstat: cannot connect to server" >&2; exit 2',
    )
    with pytest.raises(SchedulerNotAnswering, match="qstat failed .*cannot connect"):
        PbsBackend().poll(run_dir_with(tmp_path / "a", None), "9.server")
    stand_in(scheduler_bin, "qstat", 'echo "qstat: Unknown Job Id 9.server" >&2; exit 153')
    lost = PbsBackend().poll(run_dir_with(tmp_path / "b", None), "9.server")
    assert lost.state == "LOST"
    done = PbsBackend().poll(run_dir_with(tmp_path / "c", {"exit_code": 0}), "9.server")
    assert (done.state, done.exit_code) == ("COMPLETED", 0)


# ---- the handle keeps the last known state while the scheduler is silent -------------------


class _Scheduler:
    name, poll_interval = "stand-in", 0.01

    def __init__(self) -> None:
        self.answers: list[Status | SchedulerNotAnswering] = []

    def poll(self, run_dir: Path, job_id: str) -> Status:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_silent_scheduler_keeps_the_last_state_and_says_since_when(tmp_path):
    run = RunDir(tmp_path)
    run.update(state="QUEUED", job_id="7", backend="stand-in")
    scheduler = _Scheduler()
    job = Job(run, scheduler, "7")
    down = SchedulerNotAnswering("squeue gave no answer in 20 s")
    scheduler.answers = [Status("RUNNING", hosts=("n1",)), down, down, Status("COMPLETED", 0)]
    assert job.refresh() == "RUNNING"
    assert job.refresh() == "RUNNING"
    since = run.manifest()["silent_since"]
    assert (
        run.manifest()["note"]
        == f"scheduler not answering since {since} (squeue gave no answer in 20 s)"
    )
    assert job.refresh() == "RUNNING"
    assert run.manifest()["silent_since"] == since  # since the first silence, not the last
    assert job.refresh() == "COMPLETED"
    manifest = run.manifest()
    assert (manifest["note"], manifest["silent_since"], manifest["hosts"]) == ("", None, ["n1"])
