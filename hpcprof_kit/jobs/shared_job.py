"""One scheduler job that holds several sweep variants, explained as a whole.

A sweep runs its variants as one job array (PBS ``N[]``, Slurm ``N``) or, where a queue takes
one job per user, as one PBS job that runs them in turn. The scheduler then keeps one word for
the job as a whole (PBS: one ``Exit_status``, 1 if the script failed anywhere, -29 at the
walltime; an array's is the last subjob's), while each variant's own state comes from its own
record. ``explain`` of such a job id lists every variant with its state and exit code, then the
job's own exit status, saying where the server kept none.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["explain_shared_job", "is_shared_job"]


def is_shared_job(found: list[tuple[Path, dict]]) -> bool:
    """Whether the runs matched by one job id are the variants of one sweep (an array, or a
    job running them in turn), rather than unrelated runs that share a number."""
    sweeps = {str(data.get("sweep") or "") for _, data in found}
    return len(found) > 1 and len(sweeps) == 1 and "" not in sweeps


def _job_exit_status(job_id: str, backend: str) -> str:
    """What the scheduler says of the whole job: its state letter and Exit_status (PBS),
    or why it cannot say."""
    if backend != "pbs":
        return "the scheduler keeps one state per array task: each variant's line above"
    from hpcprof_kit.jobs.backends import SchedulerNotAnswering
    from hpcprof_kit.jobs.backends.pbs import attributes

    try:
        attrs = attributes(job_id)
    except SchedulerNotAnswering as exc:
        return f"unknown now ({exc})"
    if attrs is None:
        return ("unknown: PBS kept no record of the job (no job history, or it was purged); "
                "each variant's own record above is the only word on it")  # fmt: skip
    code = attrs.get("Exit_status")
    said = f"job_state {attrs.get('job_state', '?')}"
    said += f", Exit_status {code}" if code is not None else ", no Exit_status yet"
    if attrs.get("comment"):
        said += f" ({attrs['comment']})"
    return said


def explain_shared_job(job_id: str, found: list[tuple[Path, dict]]) -> str:
    """Every variant the job ``job_id`` holds (each refreshed), then the job's own word."""
    from hpcprof_kit.jobs import Job

    rows = []
    for path, data in sorted(found, key=lambda item: int(item[1].get("sweep_index", 0))):
        state = Job.from_run_dir(path).refresh() if data.get("job_id") else data.get("state")
        data = Job.from_run_dir(path).manifest if data.get("job_id") else data
        code = data.get("exit_code")
        rows.append((str(data.get("sweep_index", "?")), str(state),
                     "-" if code is None else str(code), str(path)))  # fmt: skip
    first = found[0][1]
    in_turn = any(data.get("in_turn") for _, data in found)
    shared = str(first.get("array_job_id") or first.get("job_id"))
    how = "in turn, one after another" if in_turn else "as one job array"
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"job {shared} runs {len(rows)} variants of sweep {first.get('sweep')} {how}:"]
    lines += [f"  variant {i.ljust(widths[0])}  {s.ljust(widths[1])}  exit code "
              f"{c.ljust(widths[2])}  {p}" for i, s, c, p in rows]  # fmt: skip
    lines.append(f"  the job's own word: {_job_exit_status(shared, str(first.get('backend')))}")
    if in_turn:
        lines.append("  (its one Exit_status speaks for every variant it ran; each variant's "
                     "state comes from its own record)")  # fmt: skip
    left = [r for r in rows if r[1] not in ("COMPLETED", "QUEUED", "RUNNING")]
    if left:
        lines.append(f"  what to do: hpcprof-kit explain RUN_DIR for one variant; hpcprof-kit "
                     f"sweep --resume {first.get('sweep')} runs the {len(left)} that did not "
                     "complete again")  # fmt: skip
    return "\n".join(lines)
