"""The variants that share one PBS job (a queue that takes one job per user runs a sweep's
variants in turn inside a single job): who they are, and what deleting that job would end.

A variant is cancelled alone while its turn has not come (the job passes it over); deleting
the job itself ends the variant running and skips every one after it, so the kit does that
only when the user asks for the whole job (``hpcprof-kit cancel --all``).
"""

from __future__ import annotations

import json
from pathlib import Path

from hpcprof_kit.jobs.backends.outcome import read_job_end
from hpcprof_kit.jobs.backends.pbs_outcome import read_manifest, turn_of


def shared_turns(run_dir: Path, job_id: str) -> list[Path]:
    """The run directories of the other variants that the same job runs, in their order."""
    manifest = read_manifest(run_dir)
    sweep = manifest.get("sweep")
    if not sweep:
        return []
    try:
        entries = json.loads((Path(sweep) / "sweep.json").read_text())["variants"]
    except (OSError, ValueError, KeyError):
        return []
    here = Path(run_dir).resolve()
    return [
        Path(sweep) / e["run_dir"]
        for e in entries
        if e.get("job_id") == job_id
        and e.get("run_dir")
        and (Path(sweep) / e["run_dir"]).resolve() != here
    ]


def turn_word(run_dir: Path) -> str:
    """Where a variant of a shared job stands: 'ended', 'running', 'skipped' or 'waiting'."""
    if read_job_end(run_dir) is not None:
        return "ended"
    turn = turn_of(run_dir)
    if turn == "started" or (Path(run_dir) / "stdout").exists():
        return "running"
    return "skipped" if turn == "skipped" else "waiting"


def shared_job_refusal(run_dir: Path, job_id: str) -> str:
    """Why the kit will not delete a shared job for one variant, and what to do instead.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> (folder / "job_end.json").write_text('{"exit_code": 0}')
    16
    >>> shared_job_refusal(folder, "7.pbs").split(";")[0]
    'this variant has ended already, and job 7.pbs runs no other variant it could still end'
    """
    me = turn_word(run_dir)
    others = {p.name: turn_word(p) for p in shared_turns(run_dir, job_id)}
    running = [n for n, w in others.items() if w == "running"]
    waiting = [n for n, w in others.items() if w == "waiting"]
    if me == "ended" and not running and not waiting:
        return (f"this variant has ended already, and job {job_id} runs no other variant it "
                "could still end; nothing to cancel")  # fmt: skip
    said = "has ended already" if me == "ended" else "is running now"
    ends = []
    if running:
        ends.append(f"end the variant running now ({', '.join(running)})")
    if waiting:
        ends.append(f"skip {len(waiting)} variant(s) not begun ({', '.join(waiting)})")
    if me == "running":
        ends.insert(0, "end this variant")
    return (
        f"this variant {said} inside job {job_id}, which runs its sweep's variants one after "
        f"another; PBS can only delete the whole job, which would {' and '.join(ends)}. "
        "Cancel a variant before its turn to skip it alone, or pass --all (job.cancel("
        "whole_job=True)) to delete the whole job"
    )
