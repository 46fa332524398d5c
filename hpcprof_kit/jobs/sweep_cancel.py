"""A sweep cancelled as a whole: every variant that has not ended, whatever job holds it.

A sweep's variants live in one scheduler job array (PBS ``N[]``, Slurm ``N``), in one PBS job
that runs them in turn, or in a job each (the local backend, a sweep of separate jobs). The
cancel is asked once per job that holds a variant still going: ``qdel 'N[]'`` (one id per
call: a real OpenPBS 23.06 server crashed on an array deleted together with other ids),
``scancel N``, the shared job with every turn in it. Each variant keeps, in its manifest, what
was asked and what the scheduler answered; its state afterwards comes from its own record and
the scheduler, never from the intent.
"""

from __future__ import annotations

import time
from pathlib import Path

from hpcprof_kit.errors import SubmitError
from hpcprof_kit.jobs.backends import FINAL_STATES, ask_to_cancel

__all__ = ["cancel_sweep", "sweep_job_ids"]

CANCEL_COMMANDS = {"pbs": "qdel", "slurm": "scancel"}
SETTLE_S = 30.0  # how long the states are followed after the cancel (as Job.cancel does)


def sweep_job_ids(sweep) -> list[str]:
    """The scheduler jobs that hold the sweep's variants, in the order of the variants: an
    array's id (``N[]``, Slurm's ``N``), a shared job's, else each variant's own."""
    from hpcprof_kit.jobs.rundir import RunDir

    ids: list[str] = []
    for entry in sweep.record()["variants"]:
        if not entry.get("run_dir"):
            continue
        data = RunDir(sweep.path / entry["run_dir"]).manifest()
        job = str(data.get("array_job_id") or data.get("job_id") or "")
        if job and job not in ids:
            ids.append(job)
    return ids


def _variants(sweep) -> list[tuple[int, Path, dict]]:
    from hpcprof_kit.jobs.rundir import RunDir

    out = []
    for entry in sweep.record()["variants"]:
        if entry.get("run_dir"):
            path = sweep.path / entry["run_dir"]
            out.append((entry["index"], path, RunDir(path).manifest()))
    return out


def cancel_sweep(sweep) -> dict[int, str]:
    """Cancel every variant of ``sweep`` that has not ended; their states afterwards, by
    index (variants never submitted keep theirs). SubmitError naming the job when the
    scheduler refused a cancel (the other jobs are still asked)."""
    from hpcprof_kit.jobs.handle import Job

    going: dict[str, list[tuple[int, Path, dict]]] = {}
    for index, path, data in _variants(sweep):
        if not data.get("job_id") or Job.from_run_dir(path).refresh() in FINAL_STATES:
            continue
        job = str(data.get("array_job_id") or data["job_id"])
        going.setdefault(job, []).append((index, path, data))
    refused = []
    for job, variants in going.items():
        index, path, data = variants[0]
        backend = str(data.get("backend"))
        try:
            if data.get("in_turn"):  # the shared job, with every turn in it
                Job.from_run_dir(path).backend.cancel(path, data["job_id"], whole_job=True)
            elif data.get("array_job_id") and backend in CANCEL_COMMANDS:
                ask_to_cancel([p for _, p, _ in variants], [CANCEL_COMMANDS[backend], job],
                              f"cancel the array {job} of sweep {sweep.path}")  # fmt: skip
            else:
                for _, own, _ in variants:
                    Job.from_run_dir(own).backend.cancel(own, Job.from_run_dir(own).job_id)
        except SubmitError as exc:
            refused.append(str(exc))
    if refused:  # nothing is known to end: the states come from the records and the server
        raise SubmitError("; ".join(refused))
    deadline = time.monotonic() + SETTLE_S
    states = sweep.refresh()
    while any(s in ("QUEUED", "RUNNING") for s in states.values()) and time.monotonic() < deadline:
        time.sleep(0.5)
        states = sweep.refresh()
    return states
