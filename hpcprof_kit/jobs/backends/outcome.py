"""How a job ended: its own record (``job_end.json``), what an exit code means, and one state
from the job's record and the scheduler's word together.

The job script's EXIT trap writes ``{"exit_code": N, "ended_at": ...}`` (and ``"signal"`` when
it knows one) into the run directory whatever started it. The record is read first:

- an exit code from 1 to 128 is the job's own failure: FAILED, even while the scheduler is
  not answering;
- 0 is confirmed with the scheduler when it answers, because bash runs the EXIT trap with
  status 0 when the script itself is killed by SIGTERM (the walltime, ``scancel``, a
  preemption), and only the scheduler knows it was one of those;
- 129-192 (128 + N) means a signal ended the script: the scheduler says why (TIMEOUT,
  CANCELLED, requeued); when it no longer knows the job, FAILED with the signal named.

A scheduler that no longer knows the job, or reports it ended without an exit status, leaves
the record to answer; without one the job is LOST, never FAILED.

>>> from_exit_code(137).note
'exit code 137: killed by signal 9 (SIGKILL)'
>>> judge(JobEnd(3), Status("RUNNING"), cancelled=False).state  # the scheduler lags behind
'FAILED'
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, replace
from pathlib import Path

from hpcprof_kit.jobs.backends import FINAL_STATES, Status

JOB_END = "job_end.json"
# A scheduler's answer meaning "the job is over, but I cannot say how" (finished without an
# exit status, or no longer known); never shown to a user: judge() turns it into a state.
ENDED = "ENDED"


@dataclass(frozen=True)
class JobEnd:
    """The job script's own record of its end."""

    exit_code: int
    ended_at: str = ""
    signal: int | None = None

    @property
    def killed_by(self) -> int | None:
        """The signal that ended the script, if one did."""
        return self.signal or signal_of(self.exit_code)


def read_job_end(run_dir: Path) -> JobEnd | None:
    """The record the job script wrote when it ended; None before that (or if unreadable)."""
    try:
        data = json.loads((Path(run_dir) / JOB_END).read_text())
        sig = data.get("signal")
        return JobEnd(
            int(data["exit_code"]), str(data.get("ended_at", "")), int(sig) if sig else None
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def signal_of(exit_code: int | None) -> int | None:
    """The signal behind a shell exit code (128 + N), if it is one.

    >>> signal_of(143), signal_of(1), signal_of(None)
    (15, None, None)
    """
    if exit_code is not None and 128 < exit_code <= 128 + 64:
        return exit_code - 128
    return None


def signal_note(sig: int) -> str:
    """'killed by signal 9 (SIGKILL)'."""
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = "unnamed"
    return f"killed by signal {sig} ({name})"


def from_exit_code(code: int, hosts: tuple[str, ...] = (), source: str = "") -> Status:
    """COMPLETED for 0, else FAILED; a signal's exit code names the signal."""
    if code == 0:
        return Status("COMPLETED", 0, hosts, source)
    sig = signal_of(code)
    note = f"exit code {code}: {signal_note(sig)}" if sig else ""
    if source:
        note = f"{note} ({source})" if note else source
    return Status("FAILED", code, hosts, note)


def from_record(record: JobEnd, hosts: tuple[str, ...] = (), cancelled: bool = False) -> Status:
    """The state the job's own record gives when the scheduler cannot add anything: a
    cancel by the kit counts only where the record says a signal ended the job (one that
    ran to its end despite a cancel asked is what its record says)."""
    if cancelled and record.killed_by:
        return Status("CANCELLED", record.exit_code, hosts, f"cancelled (exit code from {JOB_END})")
    if record.signal:
        return Status(
            "FAILED", record.exit_code, hosts, f"{signal_note(record.signal)} ({JOB_END})"
        )
    return from_exit_code(record.exit_code, hosts, f"exit code from {JOB_END}")


def unknown_cause(record: JobEnd, answer: Status) -> str:
    """The note of a SIGTERM the scheduler no longer knows the cause of: a cancel, the time
    limit and the program itself all leave the same record.

    >>> print(unknown_cause(JobEnd(143, signal=15), Status(ENDED, note="Slurm no longer knows "
    ...       "job 7")))  # doctest: +NORMALIZE_WHITESPACE
    exit code 143, killed by signal 15 (SIGTERM) (job_end.json); the cause is unknown: Slurm no
    longer knows job 7, and a cancel, the time limit or the program itself exiting 143 all
    leave this record
    """
    return (f"exit code {record.exit_code}, {signal_note(signal.SIGTERM)} ({JOB_END}); the "
            f"cause is unknown: {answer.note or 'the scheduler no longer knows the job'}, and a "
            f"cancel, the time limit or the program itself exiting {record.exit_code} all leave "
            "this record")  # fmt: skip


def decided_by_record(record: JobEnd | None) -> Status | None:
    """The state the record settles on its own (a plain failure); None when it needs the
    scheduler's word (no record, exit 0, or a signal)."""
    if record is None or record.exit_code == 0 or record.killed_by:
        return None
    return from_record(record)


def judge(record: JobEnd | None, answer: Status, cancelled: bool) -> Status:
    """One state from the job's own record and the scheduler's answer (see the module doc)."""
    if answer.state == ENDED:
        if record is not None and record.killed_by == signal.SIGTERM and not cancelled:
            return Status("FAILED", record.exit_code, answer.hosts, unknown_cause(record, answer))
        if record is not None:
            return from_record(record, answer.hosts, cancelled)
        if cancelled:
            return Status("CANCELLED", None, answer.hosts, f"cancelled; {answer.note}")
        return Status(
            "LOST", None, answer.hosts,
            f"{answer.note}, and the job left no exit record ({JOB_END})",
        )  # fmt: skip
    if answer.state in FINAL_STATES:
        if cancelled and answer.state == "FAILED":  # the kit's accepted cancel killed it
            return replace(answer, state="CANCELLED")
        if answer.exit_code is None and record is not None:
            return replace(answer, exit_code=record.exit_code)
        return answer
    own = decided_by_record(record)
    if own is not None and answer.state == "RUNNING":  # the scheduler has not caught up yet
        return replace(own, hosts=answer.hosts)
    return answer  # queued (a requeued job's record is from its earlier run) or running
