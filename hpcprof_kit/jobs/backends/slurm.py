"""The Slurm backend: ``sbatch --parsable``; state from the job's own record (``job_end.json``),
then ``squeue``, ``scontrol show job`` and the completion records (``sacct -c``, or the
jobcomp/filetxt file named by JobCompLoc); ``scancel``.

A Slurm command that fails or times out is "not answering" (the job keeps its last known
state); only Slurm's "Invalid job id" means it no longer knows the job. A sweep variant whose
array task ended before it began (``scancel`` of the task or of its array while it was
pending: no record, no output) is NOT_STARTED, which the sweep's ``--resume`` runs; cancelled
by the kit, it is CANCELLED, as the user asked.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path

from hpcprof_kit.jobs.backends import (
    COMMAND_TIMEOUT_S,
    SchedulerNotAnswering,
    Status,
    ask_to_cancel,
    can_never_run,
    cancel_accepted,
    held_note,
    is_held,
    job_environment,
    run_command,
)
from hpcprof_kit.jobs.backends.outcome import (
    ENDED,
    decided_by_record,
    judge,
    read_job_end,
    signal_note,
)
from hpcprof_kit.systems import System

# A job an administrator holds: only they (or the site's support) can release it.
ADMIN_HELD = "held by an administrator: it waits for their release, not for nodes"
# Every state squeue, scontrol and sacct print (squeue(1) "JOB STATE CODES", and the state
# flags of Slurm's job_state_codes page) -> the kit's state and what to tell the user.
SLURM_STATES: dict[str, tuple[str, str]] = {
    "PENDING": ("QUEUED", ""),
    "CONFIGURING": ("QUEUED", "its nodes are being configured"),
    "POWER_UP_NODE": ("QUEUED", "its nodes are powering up"),
    "REQUEUED": ("QUEUED", "requeued: it will run again"),
    "REQUEUE_FED": ("QUEUED", "requeued by the federation"),
    "REQUEUE_HOLD": ("QUEUED", "requeued and held: `scontrol release` lets it run"),
    "SPECIAL_EXIT": ("QUEUED", "requeued and held (SPECIAL_EXIT): `scontrol release` lets it run"),
    "RESV_DEL_HOLD": ("QUEUED", "held: its reservation was deleted"),
    "SUSPENDED": ("QUEUED", "suspended: it keeps its place and resumes later"),
    "RUNNING": ("RUNNING", ""),
    "COMPLETING": ("RUNNING", "completing"),
    "STAGE_OUT": ("RUNNING", "staging out files"),
    "SIGNALING": ("RUNNING", "being signalled"),
    "STOPPED": ("RUNNING", "stopped (SIGSTOP); it keeps its CPUs"),
    "RESIZING": ("RUNNING", "changing size"),
    "UPDATE_DB": ("RUNNING", "being recorded in the accounting database"),
    "COMPLETED": ("COMPLETED", ""),
    "CANCELLED": ("CANCELLED", ""),
    "TIMEOUT": ("TIMEOUT", "the walltime ran out"),
    "DEADLINE": ("TIMEOUT", "its deadline passed"),
    "FAILED": ("FAILED", ""),
    "NODE_FAIL": ("FAILED", "a node of the job failed"),
    "BOOT_FAIL": ("FAILED", "its nodes failed to boot"),
    "LAUNCH_FAILED": ("FAILED", "Slurm could not launch it"),
    "RECONFIG_FAIL": ("FAILED", "its nodes could not be reconfigured"),
    "OUT_OF_MEMORY": ("FAILED", "out of memory"),
    "REVOKED": ("CANCELLED", "revoked: another cluster of the federation runs it"),
    # PREEMPTED: QUEUED when Slurm requeues the job (Requeue=1), else final (state_from_fields).
    "PREEMPTED": ("CANCELLED", "preempted by another job and not requeued"),
}
_FIELD = re.compile(r"(\w+)=(\S*)")
_REASON = re.compile(r"\bReason=(.*?)(?= \w+=|$)", re.MULTILINE)  # may hold spaces
# Slurm's words for a job it no longer knows; "Job 12_2 not found": scontrol of an array task
# gone from the controller's memory (one cancelled while pending, among others).
_FORGOTTEN = re.compile(r"Invalid job id|^Job \S+ not found$", re.MULTILINE)


def _ask(args: list[str], timeout: float) -> str | None:
    """The command's output; None when Slurm says it does not know the job. A failure of any
    other kind (no controller, a timeout, a missing command) is SchedulerNotAnswering."""
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise SchedulerNotAnswering(f"{args[0]} is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise SchedulerNotAnswering(f"{args[0]} gave no answer in {timeout:g} s") from None
    if done.returncode == 0:
        return done.stdout
    said = (done.stderr.strip() or done.stdout.strip()).splitlines()
    if _FORGOTTEN.search("\n".join(said)):
        return None
    raise SchedulerNotAnswering(f"{args[0]} failed (exit {done.returncode}): {' '.join(said)}")


def exit_code(text: str) -> int | None:
    """Slurm's ``ExitCode=code:signal`` as a shell would say it: ``0:9`` -> 137.

    >>> exit_code("3:0"), exit_code("0:9"), exit_code("")
    (3, 137, None)
    """
    code, _, sig = text.partition(":")
    if not code.isdigit():
        return None
    return 128 + int(sig) if sig.isdigit() and int(sig) and not int(code) else int(code)


def state_from_fields(fields: dict[str, str]) -> Status:
    """The kit's state from scontrol/sacct/jobcomp fields (``JobState``, ``ExitCode``, ...)."""
    raw = fields.get("JobState", "").split()[0] if fields.get("JobState") else ""
    raw = raw.split("+")[0]  # sacct: "CANCELLED by 0", squeue flags: "COMPLETING+..."
    hosts = tuple(h for h in fields.get("NodeList", "").split(",") if h and h != "(null)")
    if raw not in SLURM_STATES:
        raise SchedulerNotAnswering(
            f"Slurm reports state {raw or '(none)'!r}, which the kit does not map",
            what="state unknown",
        )
    state, note = SLURM_STATES[raw]
    if raw == "PREEMPTED" and fields.get("Requeue") == "1":
        state, note = "QUEUED", "preempted; Slurm requeues it"
    code = exit_code(fields.get("ExitCode", ""))
    _, _, sig = fields.get("ExitCode", "").partition(":")
    if state == "FAILED" and sig.isdigit() and int(sig):
        note = "; ".join(filter(None, [note, signal_note(int(sig))]))
    elif state == "FAILED" and code and code > 128:
        note = "; ".join(filter(None, [note, f"exit code {code}: {signal_note(code - 128)}"]))
    return Status(state, code if state not in ("QUEUED", "RUNNING") else None, hosts, note)


def not_begun(run_dir: Path) -> bool:
    """Whether ``run_dir`` is a sweep variant whose array task never began: the array script
    makes the variant's ``stdout`` as it starts it, and nothing else made one.

    >>> not_begun(Path("no-such-run"))
    False
    """
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(manifest, dict)
        and "sweep_index" in manifest
        and not ((run_dir / "stdout").exists() or (run_dir / "job_end.json").exists())
    )


class SlurmBackend:
    name = "slurm"
    poll_interval = 1.0
    command_timeout = COMMAND_TIMEOUT_S

    def submit(self, run_dir: Path, system: System, walltime_s: int) -> str:
        done = run_command(
            ["sbatch", "--parsable", "job.sh"],
            "submit to Slurm",
            cwd=run_dir,
            env=job_environment(run_dir),
        )
        return done.stdout.strip().split(";")[0]

    def poll(self, run_dir: Path, job_id: str) -> Status:
        try:
            answer = self.ask(job_id)
        except SchedulerNotAnswering:
            own = decided_by_record(read_job_end(run_dir))
            if own is not None:
                return own
            raise
        # Read after the answer: a job the scheduler calls ended wrote its record before that.
        record, cancelled = read_job_end(run_dir), cancel_accepted(run_dir)
        judged = judge(record, answer, cancelled)
        if judged.state in ("CANCELLED", "LOST") and record is None and not_begun(run_dir):
            if cancelled:
                return Status("CANCELLED", None, (), "cancelled by the kit before it ran")
            why = ("Slurm cancelled its array task while it was pending (scancel of the task or "
                   "of the array): no output, no record")  # fmt: skip
            if judged.state == "LOST":
                why = (f"{answer.note} (an array task cancelled while pending is forgotten at "
                       "once), and it left no output: it never ran")  # fmt: skip
            return Status("NOT_STARTED", None, (), why, answer.comment)
        return judged

    def ask(self, job_id: str) -> Status:
        """What Slurm says about the job; ``ENDED`` when it no longer knows it."""
        live = _ask(["squeue", "-h", "-j", job_id, "-o", "%T|%N|%r"], self.command_timeout)
        words = [w.strip() for w in (live or "").strip().split("|")] + ["", ""]
        if words[0] in SLURM_STATES and words[0] != "PREEMPTED":
            status = state_from_fields({"JobState": words[0], "NodeList": words[1]})
            if status.state == "QUEUED" and can_never_run(words[2]):
                return replace(status, comment=words[2])  # pending for good: a wait ends
            if status.state == "QUEUED" and is_held(words[2]):
                note = held_note("slurm") if words[2] == "JobHeldUser" else ADMIN_HELD
                return replace(status, note=note, comment=words[2])
            if status.state in ("QUEUED", "RUNNING"):
                return status
        shown = _ask(["scontrol", "show", "job", job_id, "-o"], self.command_timeout)
        if shown:
            return state_from_fields(dict(_FIELD.findall(shown)))
        record = self._completion_record(job_id)
        if record:
            return state_from_fields(record)
        return Status(ENDED, note=f"Slurm no longer knows job {job_id}")

    def _completion_record(self, job_id: str) -> dict[str, str]:
        try:
            out = _ask(["sacct", "-c", "-j", job_id, "-n", "-P", "-o", "State,ExitCode,NodeList"],
                       self.command_timeout)  # fmt: skip
        except SchedulerNotAnswering:
            out = None
        for line in (out or "").splitlines():
            state, code, nodes = (line.split("|") + ["", "", ""])[:3]
            if state:
                return {"JobState": state, "ExitCode": code, "NodeList": nodes}
        # No sacct: read the jobcomp/filetxt file itself.
        config = _ask(["scontrol", "show", "config"], self.command_timeout) or ""
        location = dict(_FIELD.findall(config.replace(" = ", "="))).get("JobCompLoc", "")
        if location.startswith("/") and Path(location).is_file():
            for line in reversed(Path(location).read_text().splitlines()):
                fields = dict(_FIELD.findall(line))
                if fields.get("JobId") == job_id:
                    return fields
        return {}

    def cancel(self, run_dir: Path, job_id: str) -> None:
        """``scancel`` the job, recording what was asked and what Slurm answered; a refused
        ``scancel`` is a SubmitError (``ask_to_cancel``)."""
        ask_to_cancel([run_dir], ["scancel", job_id], f"cancel Slurm job {job_id}")

    def reason(self, run_dir: Path, job_id: str) -> str | None:
        """Slurm's own ``Reason`` for the job (``squeue -o %r``, else ``scontrol show job``):
        why it waits (``Resources``, ``JobHeldUser``, ``PartitionNodeLimit``) or how it ended
        (``NonZeroExitCode``); None when Slurm gives none or no longer knows the job."""
        live = _ask(["squeue", "-h", "-j", job_id, "-o", "%r"], self.command_timeout)
        said = (live or "").strip()
        if not said:
            shown = _ask(["scontrol", "show", "job", job_id, "-o"], self.command_timeout) or ""
            found = _REASON.search(shown)
            said = found.group(1) if found else ""
        return said if said and said != "None" else None
