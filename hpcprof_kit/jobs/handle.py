"""``Job``: the handle of one submitted job — state, exit code, wait, tail, cancel, re-attach.

>>> from hpcprof_kit.jobs import JobSpec, submit
>>> job = submit(JobSpec(system="local", command=["echo", "hello"], ranks_per_node=1))
>>> job.wait(progress=False)
'COMPLETED'
>>> job.tail()
'hello'
"""

from __future__ import annotations

import os
import time
from collections import deque
from functools import partial
from pathlib import Path

from hpcprof_kit.errors import SubmitError
from hpcprof_kit.jobs.backends import (
    FINAL_STATES,
    STATES,
    Backend,
    SchedulerNotAnswering,
    Status,
    can_never_run,
    get_backend,
)
from hpcprof_kit.jobs.backends.pbs_outcome import in_turn
from hpcprof_kit.jobs.late_records import late_changes, waits_for_late
from hpcprof_kit.jobs.progress import progress_display, read_progress
from hpcprof_kit.jobs.rundir import RunDir, now_iso

__all__ = ["Job", "STATES"]

MAX_BACKOFF_S = 30.0  # the longest wait between polls of a scheduler that does not answer


class Job:
    """A submitted job, backed by its run directory (a kernel restart loses nothing)."""

    def __init__(self, run: RunDir, backend: Backend, job_id: str) -> None:
        self.run = run
        self.backend = backend
        self.job_id = job_id
        self.silent = False  # the last poll found the scheduler not answering

    @classmethod
    def from_run_dir(cls, path: str | os.PathLike[str]) -> Job:
        """Re-attach to an earlier run from its directory."""
        run = RunDir(Path(path).resolve())
        data = run.manifest()
        if not data.get("job_id") or not data.get("backend"):
            raise SubmitError(
                f"{run.path} was never submitted (manifest state {data.get('state')!r}); "
                "submit its spec again with submit()"
            )
        return cls(run, get_backend(data["backend"]), data["job_id"])

    def __repr__(self) -> str:
        return f"Job({self.job_id!r}, state={self.state!r}, run_dir={str(self.run_dir)!r})"

    @property
    def run_dir(self) -> Path:
        return self.run.path

    @property
    def manifest(self) -> dict:
        return self.run.manifest()

    @property
    def state(self) -> str:
        """QUEUED, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, LOST or NOT_STARTED (polled
        unless final)."""
        return self.refresh()

    @property
    def exit_code(self) -> int | None:
        self.refresh()
        return self.run.manifest().get("exit_code")

    def refresh(self) -> str:
        """Ask the backend once; record any state change in the manifest.

        A scheduler that does not answer leaves the last known state in place, with the note
        "scheduler not answering since <time>"; a final state is never overwritten (another
        process refreshing the same job may have recorded it first): for a short while after
        it, only the scheduler's late comment and exit status are taken (``late_records``).
        """
        data = self.run.manifest()
        if data.get("state") in FINAL_STATES:
            if waits_for_late(data):  # the scheduler's final comment and exit status may follow
                self._take_late_word()
            return data["state"]
        try:
            status = self.backend.poll(self.run_dir, self.job_id)
        except SchedulerNotAnswering as exc:
            self.silent = True
            return self.run.amend(partial(_silent_changes, exc=exc))["state"]
        self.silent = False
        return self.run.amend(lambda current: _changes(current, status))["state"]

    def _take_late_word(self) -> None:
        """Ask the scheduler again about an ended job; only its comment and exit status are
        taken (``late_records``)."""
        try:
            status = self.backend.poll(self.run_dir, self.job_id)
        except SchedulerNotAnswering:
            return
        self.run.amend(lambda current: late_changes(current, status)
                       if current.get("state") in FINAL_STATES else {})  # fmt: skip

    def wait(self, timeout: float | None = None, progress: bool = True) -> str:
        """Poll about once a second until the job ends (or ``timeout`` s pass); return the state.

        With ``progress=True`` a bar shows the state and how far the job is (the steps its
        app reported in ``progress.json``; else the time against the walltime). While the
        scheduler does not answer, the polls back off (up to ``MAX_BACKOFF_S`` apart).
        """
        start = time.monotonic()
        total = float(self.run.manifest().get("walltime_s", 600))
        display = progress_display(total, f"{self.job_id} {self.run_dir.name}", progress)
        state = self.refresh()
        interval = self.backend.poll_interval
        try:
            while state not in FINAL_STATES:
                if never_runs(self.run.manifest()):
                    break  # the scheduler says so; the job stays queued until cancelled
                elapsed = time.monotonic() - start
                display.update(state, elapsed, read_progress(self.run_dir))
                if timeout is not None and elapsed >= timeout:
                    break
                interval = (
                    min(interval * 2, MAX_BACKOFF_S) if self.silent else self.backend.poll_interval
                )
                if timeout is not None:
                    interval = max(min(interval, start + timeout - time.monotonic()), 0.0)
                time.sleep(interval)
                state = self.refresh()
        finally:
            said = self.run.manifest().get("comment", "")
            display.close(f"{state}: {said}" if never_runs(self.run.manifest()) else state)
        return state

    def tail(self, n: int = 20, stream: str = "stdout") -> str:
        """The last ``n`` lines of the job's ``stdout`` or ``stderr``."""
        if stream not in ("stdout", "stderr"):
            raise SubmitError(f"stream {stream!r} is not 'stdout' or 'stderr'")
        path = self.run_dir / stream
        if not path.exists():
            return ""
        with path.open(errors="replace") as fh:
            return "".join(deque(fh, maxlen=n)).rstrip("\n")

    def cancel(self, whole_job: bool = False) -> str:
        """Cancel the job if it has not ended; returns the state afterwards.

        A LOST job is refused with the reason (its process or record is gone, and the kit
        signals nothing it cannot prove is the job). A sweep variant that shares one PBS job
        with others (variants in turn) is skipped alone before its turn; once it has begun,
        only ``whole_job=True`` deletes the job, and with it the other variants' turns (a
        SubmitError says which, otherwise). A scheduler that refuses the cancel (a server
        down) is a SubmitError with its words, also kept in the manifest's ``cancel``: the job
        runs on, and its state keeps coming from its own record and the scheduler.
        """
        state = self.refresh()
        if state == "LOST":
            note = self.run.manifest().get("note", "")
            raise SubmitError(f"cannot cancel {self.job_id} ({self.run_dir.name}): LOST, {note}")
        shared = whole_job and self.backend.name == "pbs" and in_turn(self.run.manifest())
        if shared:  # this variant may have ended; the job it shares may not have
            self.backend.cancel(self.run_dir, self.job_id, whole_job=True)  # type: ignore[call-arg]
        elif state in FINAL_STATES:
            return state
        else:
            self.backend.cancel(self.run_dir, self.job_id)
        deadline = time.monotonic() + 30
        state = self.refresh()
        while state not in FINAL_STATES and time.monotonic() < deadline:
            time.sleep(min(self.backend.poll_interval, 0.5))
            state = self.refresh()
        return state


def never_runs(manifest: dict) -> bool:
    """The job is queued and its scheduler says it can never run (PBS ``Can Never Run: ...``,
    Slurm's partition-limit reasons)."""
    return manifest.get("state") == "QUEUED" and can_never_run(manifest.get("comment", ""))


def _changes(current: dict, status: Status) -> dict:
    """The manifest fields a new status changes; nothing once the manifest holds a final state."""
    if current.get("state") in FINAL_STATES:
        return {}
    changes: dict = {}
    if status.state != current.get("state") or status.exit_code != current.get("exit_code"):
        changes = {"state": status.state, "exit_code": status.exit_code}
        if status.hosts:
            changes["hosts"] = list(status.hosts)
        if status.state == "RUNNING" and not current.get("started_at"):
            changes["started_at"] = now_iso()
        if status.state in FINAL_STATES:
            changes["ended_at"] = now_iso()
            changes["started_at"] = current.get("started_at") or changes["ended_at"]
    if status.note != current.get("note", "") and (status.note or "note" in current):
        changes["note"] = status.note  # the latest word: an old note would now mislead
    # a server that forgot the job (no history) must not erase why it could never run
    keep = status.state in FINAL_STATES and can_never_run(current.get("comment", ""))
    said = status.comment != current.get("comment", "") and (status.comment or "comment" in current)
    if said and not (keep and not status.comment):
        changes["comment"] = status.comment  # the scheduler's own word (PBS comment)
    if current.get("silent_since"):
        changes["silent_since"] = None  # the scheduler answers again
    return changes


def _silent_changes(current: dict, *, exc: SchedulerNotAnswering) -> dict:
    if current.get("state") in FINAL_STATES:
        return {}
    since = current.get("silent_since") or now_iso()
    return {"silent_since": since, "note": f"{exc.what} since {since} ({exc.detail})"}
