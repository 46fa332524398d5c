"""What a scheduler writes after a job has ended: its final comment, the job's staged stderr
and its exit status.

A job's own record (``job_end.json``) can settle its state (a failure with exit 3) while PBS
still shows the job running: a real OpenPBS 23.06 server showed the job's stderr and its final
comment ("... and failed") about 3 s after ``qstat`` first showed the job ended, and until
then an empty stderr and the comment from its start ("Job run at ... on (host:ncpus=1)"). So,
once a state is final:

- for ``LATE_S`` seconds after it was recorded, while the scheduler's comment is not a final
  one, ``Job.refresh`` asks the scheduler again and takes from its answer only the comment and
  the exit status (never another state: a final state stays);
- an explanation (``submit --wait``, ``wait_for``, ``explain``) first waits, at most as long,
  for that final comment (:func:`settle`).

>>> final_comment("Job run at Tue Nov 24 at 19:53 on (pbshost:ncpus=1) and failed")
True
>>> final_comment("Job run at Tue Nov 24 at 19:53 on (pbshost:ncpus=1)")
False
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone

from hpcprof_kit.jobs.backends import Status

__all__ = ["LATE_S", "final_comment", "late_changes", "settle", "waits_for_late"]

LATE_S = 30.0  # how long after a final state the kit still takes a late comment / exit status
# PBS's comment on a job it has finished: "Job run at ... and finished|failed|terminated by
# USER@HOST|exceeded resource walltime"; a subjob's "Subjob finished".
_FINAL = re.compile(
    r" and (finished|failed|terminated\b.*|exceeded resource \w+)$|^Subjob finished"
)
_STARTED = "Job run at "  # the comment of a job PBS has started and not yet finished


def final_comment(comment: str | None) -> bool:
    """Whether a PBS comment is its word on a finished job."""
    return bool(comment) and bool(_FINAL.search(comment))


def waits_for_late(manifest: dict, now: float | None = None) -> bool:
    """Whether a run in a final state may still get its scheduler's late word: a PBS job whose
    recorded comment is the one from its start, within ``LATE_S`` of its end."""
    comment = str(manifest.get("comment") or "")
    if manifest.get("backend") != "pbs" or not comment.startswith(_STARTED):
        return False
    if manifest.get("in_turn"):  # the comment is the shared job's, which runs on
        return False
    if final_comment(comment):
        return False
    try:
        ended = datetime.fromisoformat(str(manifest["ended_at"])).timestamp()
    except (KeyError, ValueError):
        return False
    now = datetime.now(timezone.utc).timestamp() if now is None else now
    return now - ended < LATE_S


def late_changes(current: dict, status: Status) -> dict:
    """What a late answer may change in a final manifest: the comment (once the scheduler
    has a new one, or has forgotten the job) and the exit status the scheduler gives; never
    the state."""
    changes: dict = {}
    if status.comment != current.get("comment", ""):
        changes["comment"] = status.comment
    same_state = status.state == current.get("state")
    if same_state and status.exit_code not in (None, current.get("exit_code")):
        changes["exit_code"] = status.exit_code
    return changes


def settle(job, timeout: float = LATE_S, interval: float = 0.5) -> None:
    """Before an explanation: wait, at most ``timeout`` seconds, for the scheduler's late word
    on a job that has ended (its final comment, and with it PBS's staged stderr)."""
    deadline = time.monotonic() + timeout
    job.refresh()
    while waits_for_late(job.manifest) and time.monotonic() < deadline:
        time.sleep(interval)
        job.refresh()
