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
from dataclasses import replace
from pathlib import Path

from hpcprof_kit.errors import SubmitError
from hpcprof_kit.jobs.backends import (
    COMMAND_TIMEOUT_S,
    SchedulerNotAnswering,
    Status,
    ask_to_cancel,
    cancel_accepted,
    held_note,
    job_environment,
    run_command,
)
from hpcprof_kit.jobs.backends.outcome import (
    ENDED,
    JOB_END,
    decided_by_record,
    from_exit_code,
    read_job_end,
    signal_note,
)
from hpcprof_kit.jobs.backends.pbs_outcome import (
    claim_turn,
    gather,
    in_turn,
    judge_run,
    read_manifest,
)
from hpcprof_kit.jobs.backends.pbs_turns import shared_job_refusal, shared_turns, turn_word
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


NO_HISTORY = "not configured to maintain job history"
FINISHED_EXIT = 35  # PBSE_HISTJOBID: "Job has finished, use -x or -H ..."
DELETED_SUBSTATE = "91"  # JOB_SUBSTATE_TERMINATED: deleted (qdel), before or while it ran
TERMINATED_BY = re.compile(r"terminated by (\S+@\S+)")


def attributes(job_id: str, timeout: float = COMMAND_TIMEOUT_S) -> dict[str, str] | None:
    """The job's attributes: PBS Pro's JSON (history included) when offered, else ``qstat -f``;
    None when the server does not know the job; SchedulerNotAnswering when it cannot be asked
    or its answer cannot be read (the answer is kept, verbatim, in the message).

    A server that keeps no job history (OpenPBS's default) answers ``qstat -x`` with JSON
    that has no ``Jobs`` and says so on stderr: the job is then asked for without ``-x``,
    which shows it while it is queued or running; once it has finished the server says so
    (exit 35) and the job's own record decides how it ended.
    """
    done = _qstat(["qstat", "-x", "-F", "json", "-f", job_id], timeout)
    if done.returncode == 0 and done.stdout.lstrip().startswith("{"):
        jobs = _json_jobs(done, job_id)
        if jobs is not None or NO_HISTORY not in done.stderr:
            return jobs
        done = _qstat(["qstat", "-F", "json", "-f", job_id], timeout)
        if done.returncode == 0 and done.stdout.lstrip().startswith("{"):
            return _json_jobs(done, job_id)
        if done.returncode == FINISHED_EXIT or _forgotten(done):
            return None
    if _forgotten(done):
        return None
    done = _qstat(["qstat", "-f", job_id], timeout)  # a Torque-style client
    if done.returncode == 0:
        return text_attributes(done.stdout) or None
    if _forgotten(done) or done.returncode == FINISHED_EXIT:
        return None
    said = (done.stderr.strip() or done.stdout.strip()).replace("\n", " ")
    raise SchedulerNotAnswering(f"qstat failed (exit {done.returncode}): {said}")


def _json_jobs(done: subprocess.CompletedProcess[str], job_id: str) -> dict[str, str] | None:
    """The first job of a ``qstat -F json`` answer (None when it lists none)."""
    try:
        jobs = json.loads(done.stdout).get("Jobs")
    except (ValueError, AttributeError):
        jobs = "unreadable"
    if jobs is None:
        return None
    if not isinstance(jobs, dict):
        raise SchedulerNotAnswering(
            f"qstat -F json -f {job_id} answered {done.stdout.strip()[:500]!r}",
            what="scheduler answer not understood",
        )
    for attrs in jobs.values():
        return {k: str(v) for k, v in attrs.items() if not isinstance(v, dict)}
    return None


def text_attributes(text: str) -> dict[str, str]:
    """``qstat -f``'s text form as attributes; PBS wraps a long value onto the following
    lines, each indented with a tab, which belong to the value above (a Torque-style
    client's tab-indented ``name = value`` lines stay attributes).

    >>> text_attributes("Job Id: 7.h\\n    comment = Job run at Tue Nov 24 at 19:51 on (h:\\n\\tncpus=1) and finished\\n    job_state = F\\n")
    {'comment': 'Job run at Tue Nov 24 at 19:51 on (h:ncpus=1) and finished', 'job_state': 'F'}
    """
    # a tab-indented line that is itself "name = value" is an attribute (Torque-style
    # clients indent every attribute with a tab); any other continues the value above
    joined = re.sub(r"\n\t(?![\w.]+ = )", "", text)
    return dict(_LINE.findall(joined))


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
    """The kit's state from PBS attributes (``job_state``, ``Exit_status``/``exit_status``,
    ``substate``, ``comment``); ``ENDED`` when the job finished without an exit status
    (Torque-style wrappers). A job deleted with ``qdel`` (substate 91; PBS's comment says
    "terminated by USER@HOST" when it had started) is CANCELLED, whoever deleted it; a job
    the kit's accepted ``qdel`` ended with a signal's status, where the server shows no
    substate (Torque-style). ``cancelled`` alone never makes a job that finished CANCELLED.
    The ``comment`` rides along on every state.

    >>> state_from_attributes({"job_state": "F", "Exit_status": "271", "substate": "91",
    ...     "comment": "Job run at Tue Nov 24 at 19:54 on (h:ncpus=1) and terminated by u@h"}).note
    'deleted by u@h (qdel): Exit_status 271: killed by signal 15 (SIGTERM)'
    """
    letter = attrs.get("job_state", "")
    hosts = tuple(sorted({h.split("/")[0] for h in attrs.get("exec_host", "").split("+") if h}))
    said = attrs.get("comment", "").strip()
    mapped = PBS_STATES.get(letter)
    if mapped is None:
        raise SchedulerNotAnswering(
            f"PBS reports job_state {letter or '(none)'!r}, which the kit does not map",
            what="state unknown",
        )
    if letter == "H":  # qhold: it waits for qrls, not for nodes
        return Status(mapped, None, hosts, held_note("pbs"), comment=said)
    if mapped != ENDED:
        return Status(mapped, None, hosts, comment=said)
    raw = attrs.get("Exit_status", attrs.get("exit_status"))
    code = int(raw) if raw is not None and raw.strip().lstrip("-").isdigit() else None
    killed = code is not None and code > SIGNAL_BASE
    deleted = attrs.get("substate") == DELETED_SUBSTATE or TERMINATED_BY.search(said)
    if deleted or (cancelled and killed and "substate" not in attrs):
        who = TERMINATED_BY.search(said)
        how = f"deleted by {who.group(1)} (qdel)" if who else "deleted (qdel)"
        if code is None:
            how += " before it ran"
        elif code > SIGNAL_BASE:
            how += f": Exit_status {code}: {signal_note(code - SIGNAL_BASE)}"
        note = "cancelled by the kit" if cancelled and not who else how
        return Status("CANCELLED", code, hosts, note, comment=said)
    if code is None:
        return Status(
            ENDED, None, hosts, "PBS reports the job finished without an exit status", said
        )
    status = from_exit_status(code, hosts)
    return Status(status.state, status.exit_code, hosts, status.note, comment=said)


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
        """The run's state: its own record first, then the server (see ``pbs_outcome``)."""
        cancelled = cancel_accepted(run_dir)
        try:
            attrs = attributes(job_id, self.command_timeout)
        except SchedulerNotAnswering:
            record = read_job_end(run_dir)
            own = decided_by_record(record)  # a plain failure settles itself
            clean = record is not None and record.exit_code == 0 and not record.killed_by
            if own is None and clean and gather(run_dir, record).variant:
                own = from_exit_code(0, source=f"exit code from {JOB_END}")  # its own turn ended
            if own is not None:
                return own
            raise
        if attrs is None:
            answer = Status(
                ENDED,
                note=f"the PBS server no longer knows job {job_id} (or keeps no job history)",
            )
        else:
            answer = state_from_attributes(attrs, cancelled)
        # Read after the answer: a job the server calls ended wrote its record before that.
        judged = judge_run(run_dir, answer, forgotten=attrs is None)
        return replace(judged, comment=answer.comment)

    def cancel(self, run_dir: Path, job_id: str, whole_job: bool = False) -> None:
        """``qdel`` the job; a variant of a job that runs its sweep's variants in turn is
        passed over when its turn comes instead, and a variant that has begun is deleted only
        with ``whole_job``, which deletes the shared job and every turn in it (a job whose
        other variants have all ended is deleted as any job). Each run the ``qdel`` ends
        records what was asked and what the server answered (``ask_to_cancel``); a refused
        ``qdel`` is a SubmitError."""
        others: list[Path] = []
        if in_turn(read_manifest(run_dir)):
            others = [p for p in shared_turns(run_dir, job_id)
                      if turn_word(p) in ("running", "waiting")]  # fmt: skip
            if others and not whole_job:
                if claim_turn(run_dir, "skipped"):
                    return  # the job runs the others and passes this one over
                raise SubmitError(shared_job_refusal(run_dir, job_id))
            for sibling in others:
                claim_turn(sibling, "skipped")  # the ones not begun yet: cancelled before it
        ask_to_cancel([run_dir, *others], ["qdel", job_id], f"cancel PBS job {job_id}")

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
