"""The PBS backend: ``qsub``; state from the job's own record (``job_end.json``), then
``qstat -x -F json -f ID`` (PBS Pro) or ``qstat -f ID`` (Torque-style clients); ``qdel``.

``job_state`` says whether the job waits, runs or has finished; ``Exit_status`` how it ended:
0-255 is the job script's exit code (128 + N: a command it ran was killed by signal N), above
256 the job was killed by signal ``status - 256``, and a negative status is one of PBS's
JOB_EXEC codes (the MoM could not start or keep the job; -29: the walltime ran out).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from hpcprof_kit.jobs.backends import (
    CANCEL_MARK,
    COMMAND_TIMEOUT_S,
    SchedulerNotAnswering,
    Status,
    job_environment,
    run_command,
)
from hpcprof_kit.jobs.backends.outcome import (
    ENDED,
    decided_by_record,
    from_exit_code,
    judge,
    read_job_end,
    signal_note,
)
from hpcprof_kit.systems import System

# PBS job_state letters (PBS Pro Reference Guide, "Job States"; C: completed in Torque).
PBS_STATES = {
    "Q": "QUEUED", "H": "QUEUED", "W": "QUEUED", "T": "QUEUED", "S": "QUEUED", "U": "QUEUED",
    "M": "QUEUED", "R": "RUNNING", "E": "RUNNING", "B": "RUNNING",
    "X": ENDED, "F": ENDED, "C": ENDED,
}  # fmt: skip
WALLTIME_EXIT = -29  # PBS Pro's JOB_EXEC_KILL_WALLTIME
SIGNAL_BASE = 256  # Exit_status above this: killed by signal (status - 256)
# PBS's JOB_EXEC codes (OpenPBS src/include/job.h; -24..-29 from the PBS Professional
# Administrator's Guide, "Job Exit Status Codes") -> the kit's state and what happened.
JOB_EXEC_CODES: dict[int, tuple[str, str]] = {
    -1: ("FAILED", "JOB_EXEC_FAIL1: the job could not start (before its files were staged)"),
    -2: ("FAILED", "JOB_EXEC_FAIL2: the job could not start (after its files were staged)"),
    -3: ("FAILED", "JOB_EXEC_RETRY: the job could not start; PBS retries it"),
    -4: ("FAILED", "JOB_EXEC_INITABT: aborted while the MoM initialised"),
    -5: ("FAILED", "JOB_EXEC_INITRST: aborted while the MoM initialised (checkpoint)"),
    -6: ("FAILED", "JOB_EXEC_INITRMG: aborted while the MoM initialised (checkpoint, migrate)"),
    -7: ("FAILED", "JOB_EXEC_BADRESRT: the job's restart failed"),
    -10: ("FAILED", "JOB_EXEC_FAILUID: invalid user or group for the job"),
    -11: ("FAILED", "JOB_EXEC_RERUN: the job was rerun"),
    -12: ("FAILED", "JOB_EXEC_CHKP: the job was checkpointed and killed"),
    -13: ("FAILED", "JOB_EXEC_FAIL_PASSWORD: bad password"),
    -14: ("FAILED", "JOB_EXEC_RERUN_SIS_FAIL: a sister MoM failed; rerun or deleted"),
    -15: ("FAILED", "JOB_EXEC_QUERST: requeued to restart from a checkpoint"),
    -16: ("FAILED", "JOB_EXEC_FAILHOOK_RERUN: a hook rejected the start; requeued"),
    -17: ("FAILED", "JOB_EXEC_FAILHOOK_DELETE: a hook rejected the start; deleted"),
    -18: ("FAILED", "JOB_EXEC_HOOK_RERUN: a hook requeued the job"),
    -19: ("FAILED", "JOB_EXEC_HOOK_DELETE: a hook deleted the job"),
    -20: ("FAILED", "JOB_EXEC_RERUN_MS_FAIL: the primary MoM was lost; rerun"),
    -21: ("FAILED", "JOB_EXEC_FAIL_SECURITY: security breach in the PBS directory"),
    -22: ("FAILED", "JOB_EXEC_HOOKERROR: a hook failed or timed out"),
    -23: ("FAILED", "JOB_EXEC_FAIL_KRB5: no Kerberos credentials"),
    -24: ("FAILED", "JOB_EXEC_KILL_NCPUS_BURST: killed for a burst over its ncpus"),
    -25: ("FAILED", "JOB_EXEC_KILL_NCPUS_SUM: killed for using more than its ncpus"),
    -26: ("FAILED", "JOB_EXEC_KILL_VMEM: killed for exceeding its vmem"),
    -27: ("FAILED", "JOB_EXEC_KILL_MEM: killed for exceeding its mem (out of memory)"),
    -28: ("FAILED", "JOB_EXEC_KILL_CPUT: killed for exceeding its cput"),
    WALLTIME_EXIT: ("TIMEOUT", "JOB_EXEC_KILL_WALLTIME: the walltime ran out"),
}
_LINE = re.compile(r"^\s*([\w.]+) = (.*)$", re.MULTILINE)
_FORGOTTEN = ("Unknown Job Id", "Unknown Job")
_UNKNOWN_JOB_EXIT = 153  # PBSE_UNKJOBID as an exit status (PBS Pro and Torque wrappers)


def _qstat(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise SchedulerNotAnswering(f"{args[0]} is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise SchedulerNotAnswering(f"{' '.join(args)} gave no answer in {timeout:g} s") from None


def _forgotten(done: subprocess.CompletedProcess[str]) -> bool:
    said = done.stderr + done.stdout
    return done.returncode == _UNKNOWN_JOB_EXIT or any(w in said for w in _FORGOTTEN)


def attributes(job_id: str, timeout: float = COMMAND_TIMEOUT_S) -> dict[str, str] | None:
    """The job's attributes: PBS Pro's JSON (history included) when offered, else ``qstat -f``;
    None when the server does not know the job; SchedulerNotAnswering when it cannot be asked."""
    done = _qstat(["qstat", "-x", "-F", "json", "-f", job_id], timeout)
    if done.returncode == 0 and done.stdout.lstrip().startswith("{"):
        for attrs in json.loads(done.stdout).get("Jobs", {}).values():
            return {k: str(v) for k, v in attrs.items() if not isinstance(v, dict)}
        return None
    if _forgotten(done):
        return None
    done = _qstat(["qstat", "-f", job_id], timeout)  # a Torque-style client
    if done.returncode == 0:
        return dict(_LINE.findall(done.stdout)) or None
    if _forgotten(done):
        return None
    said = (done.stderr.strip() or done.stdout.strip()).replace("\n", " ")
    raise SchedulerNotAnswering(f"qstat failed (exit {done.returncode}): {said}")


def from_exit_status(code: int, hosts: tuple[str, ...] = ()) -> Status:
    """The kit's state from a finished job's ``Exit_status``.

    >>> [from_exit_status(c).state for c in (0, 3, 265, -29)]
    ['COMPLETED', 'FAILED', 'FAILED', 'TIMEOUT']
    >>> from_exit_status(265).note
    'Exit_status 265: killed by signal 9 (SIGKILL)'
    """
    if code > SIGNAL_BASE:
        return Status(
            "FAILED", code, hosts, f"Exit_status {code}: {signal_note(code - SIGNAL_BASE)}"
        )
    if code < 0:
        state, meaning = JOB_EXEC_CODES.get(code, ("FAILED", "an unlisted JOB_EXEC code"))
        return Status(state, code, hosts, f"Exit_status {code}: {meaning}")
    return from_exit_code(code, hosts)


def state_from_attributes(attrs: dict[str, str], cancelled: bool = False) -> Status:
    """The kit's state from PBS attributes (``job_state``, ``Exit_status``/``exit_status``);
    ``ENDED`` when the job finished without an exit status (Torque-style wrappers)."""
    letter = attrs.get("job_state", "")
    hosts = tuple(sorted({h.split("/")[0] for h in attrs.get("exec_host", "").split("+") if h}))
    mapped = PBS_STATES.get(letter)
    if mapped is None:
        raise SchedulerNotAnswering(
            f"PBS reports job_state {letter or '(none)'!r}, which the kit does not map",
            what="state unknown",
        )
    if mapped != ENDED:
        return Status(mapped, None, hosts)
    raw = attrs.get("Exit_status", attrs.get("exit_status"))
    code = int(raw) if raw is not None and raw.strip().lstrip("-").isdigit() else None
    if cancelled:
        return Status("CANCELLED", code, hosts)
    if code is None:
        return Status(ENDED, None, hosts, "PBS reports the job finished without an exit status")
    return from_exit_status(code, hosts)


class PbsBackend:
    name = "pbs"
    poll_interval = 1.0
    command_timeout = COMMAND_TIMEOUT_S

    def submit(self, run_dir: Path, system: System, walltime_s: int) -> str:
        done = run_command(
            ["qsub", "-o", str(run_dir / "stdout"), "-e", str(run_dir / "stderr"), "job.sh"],
            "submit to PBS",
            cwd=run_dir,  # becomes PBS_O_WORKDIR, the script's run directory
            env=job_environment(run_dir),
        )
        return done.stdout.strip()

    def poll(self, run_dir: Path, job_id: str) -> Status:
        cancelled = (run_dir / CANCEL_MARK).exists()
        try:
            attrs = attributes(job_id, self.command_timeout)
        except SchedulerNotAnswering:
            own = decided_by_record(read_job_end(run_dir))
            if own is not None:
                return own
            raise
        # Read after the answer: a job the server calls ended wrote its record before that.
        record = read_job_end(run_dir)
        if attrs is None:
            answer = Status(ENDED, note=f"the PBS server no longer knows job {job_id}")
        else:
            answer = state_from_attributes(attrs, cancelled)
        return judge(record, answer, cancelled)

    def cancel(self, run_dir: Path, job_id: str) -> None:
        (run_dir / CANCEL_MARK).touch()
        run_command(["qdel", job_id], f"cancel PBS job {job_id}")

    def reason(self, run_dir: Path, job_id: str) -> str | None:
        """The PBS server's ``comment`` on the job (``Can Never Run: ...``, ``Not Running:
        ...``, ``Job run at ... and failed``); None when it has none or forgot the job."""
        return comment(attributes(job_id, self.command_timeout))


def comment(attrs: dict[str, str] | None) -> str | None:
    """The scheduler's ``comment`` among a job's attributes, if it has one.

    >>> comment({"job_state": "Q", "comment": "Can Never Run: Not enough total nodes available"})
    'Can Never Run: Not enough total nodes available'
    >>> comment({"job_state": "Q"}) is None
    True
    """
    said = (attrs or {}).get("comment", "").strip()
    return said or None
