"""After a wait: what happened to a job that did not complete, and what to do next.

``wait_for(job)`` waits like ``job.wait()``; when the job did not end COMPLETED it prints
``explain(job)``: the state, the exit code and signal from the job's own record, the last
lines of its stderr, the scheduler's own reason (Slurm's ``Reason``, PBS's ``comment``) and
the next step in plain words. A job still waiting or running is left alone: wait again, or
stop it with ``job.cancel()``. A job that COMPLETED under a vendor tracer (nsys, ncu,
unitrace) that wrote no report gets ``missing_report(job)``: what the tool said, and why.

>>> from hpcprof_kit.jobs import JobSpec, submit
>>> job = submit(JobSpec(system="local", command=["bash", "-c", "echo 'no such file' >&2; exit 3"],
...                      ranks_per_node=1))
>>> wait_for(job, timeout=60, progress=False)  # doctest: +ELLIPSIS
job local-... ended FAILED
  exit code: 3
  ...
  last lines of stderr:
    | no such file
  what to do: ...
'FAILED'
"""

from __future__ import annotations

import re

from hpcprof_kit.jobs.backends import FINAL_STATES, RELEASE, can_never_run, cancel_said, is_held
from hpcprof_kit.jobs.backends.outcome import read_job_end, signal_note

__all__ = ["ADVICE", "can_never_run", "explain", "missing_report", "not_started_advice",
           "scheduler_meaning", "wait_for"]  # fmt: skip

STDERR_LINES = 10  # how many of the last stderr lines explain() shows

# What to do next, per state, in the learner's words.
ADVICE = {
    "QUEUED": (
        "it is still waiting for nodes (the scheduler's reason says why): wait again with "
        "wait_for(job), or stop it with job.cancel()"
    ),
    "RUNNING": "it is still running: wait again with wait_for(job), or stop it with job.cancel()",
    "FAILED": (
        "read the stderr lines above (job.tail(50, 'stderr') shows more, job.tail() the "
        "output), fix the cause, then submit the spec again"
    ),
    "TIMEOUT": (
        "the walltime ran out before the job ended: submit it again with a longer walltime "
        "(JobSpec(walltime=...)) or fewer steps"
    ),
    "CANCELLED": (
        "it was cancelled (job.cancel(), qdel or scancel) before it ended: submit the spec "
        "again to rerun it"
    ),
    "LOST": (
        "its process or scheduler record is gone and it left no exit record: submit the "
        "spec again; the note above says what the kit last knew"
    ),
}
# The same advice in the command's words (RUN: the run directory, as hpcprof-kit prints it).
CLI_ADVICE = {
    "QUEUED": (
        "it is still waiting for nodes (the scheduler's reason says why): look again later "
        "(hpcprof-kit explain {run}), or stop it with hpcprof-kit cancel {run}"
    ),
    "RUNNING": (
        "it is still running: look again later (hpcprof-kit status {run}), or stop it with "
        "hpcprof-kit cancel {run}"
    ),
    "FAILED": (
        "read the stderr lines above ({run}/stderr holds all of it), fix the cause, then submit "
        "again (hpcprof-kit submit --spec {run})"
    ),
    "TIMEOUT": (
        "the walltime ran out before the job ended: submit it again with a longer walltime or "
        "fewer steps (hpcprof-kit submit --spec {run} --walltime HH:MM:SS)"
    ),
    "CANCELLED": (
        "it was cancelled (hpcprof-kit cancel, qdel or scancel) before it ended: submit it "
        "again to rerun it (hpcprof-kit submit --spec {run})"
    ),
    "LOST": (
        "its process or scheduler record is gone and it left no exit record: submit it again "
        "(hpcprof-kit submit --spec {run}); the note above says what the kit last knew"
    ),
}
# A sweep variant that never began (its job ended or was deleted first): nothing of it ran, and
# the sweep reruns exactly such variants. {why}: the kit's note, which says what ended it.
NOT_STARTED_ADVICE = (
    "it never started: {why}; Sweep.load({sweep!r}).run() runs it again, with the sweep's other "
    "variants that did not complete"
)
CLI_NOT_STARTED_ADVICE = (
    "it never started: {why}; hpcprof-kit sweep --resume {sweep} runs it again, with the "
    "sweep's other variants that did not complete"
)
# A queued job its scheduler says can never start: waiting cannot help, a new request can.
NEVER_RUNS_ADVICE = (
    "it can never start as asked (the scheduler's reason above says why), so waiting will not "
    "help: cancel it with job.cancel() and submit again with a request that fits: fewer nodes, "
    "a shorter walltime, or another queue"
)
CLI_NEVER_RUNS_ADVICE = (
    "it can never start as asked (the scheduler's reason above says why), so waiting will not "
    "help: cancel it (hpcprof-kit cancel {run}) and submit again with a request that fits: "
    "fewer --nodes, a shorter --walltime, or another --queue"
)
# A job that could never start and was deleted before it ran: the same request would wait
# for ever again (the reason is kept in the manifest, also when PBS keeps no history).
DELETED_NEVER_RUNS_ADVICE = (
    "it could never start as asked (the scheduler's reason above says why) and was deleted "
    "before it ran: submitting the same request again would wait for ever; submit again with "
    "a request that fits: fewer nodes, a shorter walltime, or another queue (JobSpec(nodes=..., "
    "walltime=..., queue=...))"
)
CLI_DELETED_NEVER_RUNS_ADVICE = (
    "it could never start as asked (the scheduler's reason above says why) and was deleted "
    "before it ran: submitting the same request again would wait for ever; submit again with "
    "a request that fits (hpcprof-kit submit --spec {run} with fewer --nodes, a shorter "
    "--walltime, or another --queue)"
)
# A held job waits for a release, not for nodes. {release}: the scheduler's command.
HELD_ADVICE = (
    "it is held, so it waits for a release, not for nodes: release it ({release}) and wait "
    "again with wait_for(job), or stop it with job.cancel()"
)
CLI_HELD_ADVICE = (
    "it is held, so it waits for a release, not for nodes: release it ({release}), then look "
    "again (hpcprof-kit explain {run}), or stop it with hpcprof-kit cancel {run}"
)
# A sweep variant that ended without completing: the sweep's resume reruns it (and only the
# variants that did not complete), in the sweep's own folder. {sweep}: that folder.
CLI_VARIANT_ADVICE = {
    "FAILED": (
        "read the stderr lines above ({run}/stderr holds all of it), fix the cause, then run "
        "the sweep's unfinished variants again (hpcprof-kit sweep --resume {sweep})"
    ),
    "TIMEOUT": (
        "the walltime ran out before the variant ended: run the sweep's unfinished variants "
        "again with a longer walltime (hpcprof-kit sweep --resume {sweep} --walltime HH:MM:SS)"
    ),
    "CANCELLED": (
        "it was cancelled (hpcprof-kit cancel, qdel or scancel) before it ended: run the "
        "sweep's unfinished variants again (hpcprof-kit sweep --resume {sweep})"
    ),
    "LOST": (
        "its process or scheduler record is gone and it left no exit record: run the sweep's "
        "unfinished variants again (hpcprof-kit sweep --resume {sweep}); the note above says "
        "what the kit last knew"
    ),
}
VARIANT_ADVICE = {
    state: words.replace("hpcprof-kit sweep --resume {sweep} --walltime HH:MM:SS",
                         "Sweep.load({sweep!r}).run() with a longer walltime")
    .replace("hpcprof-kit sweep --resume {sweep}", "Sweep.load({sweep!r}).run()")
    .replace("({run}/stderr holds all of it)", "(job.tail(50, 'stderr') shows more)")
    .replace("hpcprof-kit cancel, qdel or scancel", "job.cancel(), qdel or scancel")
    for state, words in CLI_VARIANT_ADVICE.items()
}  # fmt: skip
NEEDS_RUN = "The cells below read this run's outputs: run them once the job has COMPLETED."

# Why a vendor tracer leaves no report although the job ran to its end, per tool.
NO_REPORT = {
    "ncu": (
        "ncu records only the kernels its filter matches (NCU_KERNEL={kernel}), and none "
        "did: either their names differ on this GPU and dtype (on an H100 cuBLAS's bf16 GEMMs "
        "are nvjet_sm90_*, not *gemm*) or the app ran no GPU kernel at all (see the device in "
        "its output); take a name from an nsys run's kernel summary (hpcprof-kit ncu-plan "
        "RUN_DIR) or widen the regex, e.g. env={{'NCU_KERNEL': 'regex:gemm|nvjet'}}, and "
        "submit again"
    ),
    "nsys": (
        "with capture_steps, nsys records only between the app's cudaProfilerStart and Stop: "
        "check that the steps exist (the run has that many), and read the tool's lines above"
    ),
    "unitrace": (
        "with capture_steps, unitrace records only inside the app's capture region: check that "
        "the steps exist, and read the tool's lines above"
    ),
}
TOOL_LINE_MARKS = ("==WARNING==", "==ERROR==")  # ncu's own warning and error lines

# The scheduler reasons a learner meets most, in plain words (Slurm: squeue(1) "JOB REASON
# CODES"; PBS: the scheduler's job comment).
SLURM_REASONS = {
    "Resources": "waiting for its nodes to become free",
    "Priority": "other jobs come first",
    "JobHeldUser": "held by its owner: `scontrol release {job_id}` lets it run",
    "JobHeldAdmin": "held by an administrator: ask the site's support",
    "BeginTime": "its start time (--begin) has not come yet",
    "Dependency": "waiting for the job it depends on",
    "PartitionConfig": (
        "it asks for more nodes, CPUs or time than the partition has: ask for less, "
        "or another partition"
    ),
    "PartitionNodeLimit": "it asks for more nodes than the partition allows: ask for fewer",
    "PartitionTimeLimit": "it asks for a longer walltime than the partition allows",
    "ReqNodeNotAvail": "a node it needs is down, drained or reserved",
    "QOSMaxJobsPerUserLimit": "you already have as many jobs as your QOS allows",
    "NonZeroExitCode": "the job script exited with an error",
}
PBS_COMMENTS = {
    "Can Never Run": "the request can never fit this server: ask for fewer nodes or another queue",
    "Not Running": "waiting: the comment names what it waits for",
    "Job held by": "held (qhold): `qrls {job_id}` lets it run",
    "Subjob finished": "PBS's word for any subjob that left the queue, whether it ran or not",
}


# PBS's comment once it deleted a job that had not started ("Not Running: ... and terminated";
# one that had started says "terminated by USER@HOST").
TERMINATED = re.compile(r"^(Not Running|Can Never Run):.* and terminated$")


def scheduler_meaning(reason: str, job_id: str = "ID") -> str:
    """Plain words for a Slurm ``Reason`` or a PBS ``comment`` the kit knows; else "".

    >>> scheduler_meaning("Not Running: Not enough free nodes available and terminated")
    'ended: the job was deleted (qdel) before it ran'
    >>> scheduler_meaning("Job held by pbsuser on Thu Nov 26 10:00:00 2026", "7.pbshost")
    'held (qhold): `qrls 7.pbshost` lets it run'

    >>> scheduler_meaning("JobHeldUser", "42")
    'held by its owner: `scontrol release 42` lets it run'
    >>> scheduler_meaning("Can Never Run: Not enough total nodes available")
    'the request can never fit this server: ask for fewer nodes or another queue'
    """
    if reason in SLURM_REASONS:
        return SLURM_REASONS[reason].format(job_id=job_id)
    if TERMINATED.search(reason):  # PBS's last word on a job deleted before it ran
        if reason.startswith("Can Never Run"):
            return ("ended: the request could never fit this server, and the job was deleted "
                    "(qdel) before it ran")  # fmt: skip
        return "ended: the job was deleted (qdel) before it ran"
    said = next((words for start, words in PBS_COMMENTS.items() if reason.startswith(start)), "")
    return said.format(job_id=job_id)


def _scheduler_reason(job) -> str | None:
    """The scheduler's own word on the job; None when its backend has none (local)."""
    ask = getattr(job.backend, "reason", None)
    if ask is None:
        return None
    try:
        return ask(job.run_dir, job.job_id)
    except Exception as exc:  # a scheduler that does not answer must not hide the rest
        return f"(the scheduler could not be asked: {exc})"


def explain(job, cli: bool = False) -> str:
    """What happened to ``job`` and what to do next, as text (the state first).

    The state; the exit code and the signal from the job's own record (``job_end.json``);
    the kit's note; the scheduler's reason (Slurm ``Reason``, PBS ``comment``); the last
    lines of ``stderr``; and the advice for that state: for a job the scheduler says can
    never run, to change the request rather than wait. ``cli=True`` gives the advice as
    ``hpcprof-kit`` commands (``hpcprof-kit explain``) rather than Python calls.

    >>> from hpcprof_kit.jobs import JobSpec, submit
    >>> job = submit(JobSpec(system="local", command=["bash", "-c", "exit 3"], ranks_per_node=1))
    >>> _ = job.wait(timeout=60, progress=False)
    >>> print(explain(job).splitlines()[:2])  # doctest: +ELLIPSIS
    ['job local-... ended FAILED', '  exit code: 3']
    """
    state = job.state
    data = job.manifest
    ended = state not in ("QUEUED", "RUNNING")
    lines = [f"job {job.job_id} {'ended' if ended else 'has not ended: it is'} {state}"]
    record = read_job_end(job.run_dir) if ended else None
    code = data.get("exit_code")
    if code is None and record is not None:
        code = record.exit_code
    if code is not None:
        lines.append(f"  exit code: {code}")
    if record is not None and record.killed_by:
        lines.append(f"  signal: {signal_note(record.killed_by)}")
    if data.get("note") and state != "NOT_STARTED":  # that advice says it, with what to do
        lines.append(f"  note: {data['note']}")
    if cancel_line := cancel_said(data):  # what the kit asked and what the scheduler answered
        lines.append(f"  {cancel_line}")
    reason = _scheduler_reason(job)
    if reason:
        meaning = scheduler_meaning(reason, job.job_id)
        lines.append(f"  scheduler's reason: {reason}" + (f" ({meaning})" if meaning else ""))
    elif ended and can_never_run(data.get("comment")):  # the server forgot it; the kit kept it
        lines.append(f"  scheduler's last reason (kept by the kit): {data['comment']}")
    lines.append(f"  run directory: {job.run_dir}")
    err = job.tail(STDERR_LINES, "stderr")
    if state == "NOT_STARTED" and not err:
        lines.append("  no output: it never ran")
    elif err:
        lines.append("  last lines of stderr:")
        lines.extend(f"    | {line}" for line in err.splitlines())
    else:
        lines.append("  stderr is empty")
    if (said := _advice(job, state, reason, cli)) is not None:
        lines.append(f"  what to do: {said}")
    elif state == "COMPLETED" and (note := missing_report(job)) is not None:
        lines.append(note)
    if state != "COMPLETED" and not cli:
        lines.append(NEEDS_RUN)
    return "\n".join(lines)


def _advice(job, state: str, reason: str | None, cli: bool) -> str | None:
    """What to do next for ``job`` in ``state`` (None for a COMPLETED one): a request that can
    never run is changed, not waited for or repeated; a held job is released; a sweep
    variant is run again by its sweep's resume."""
    data, run = job.manifest, job.run_dir
    never = can_never_run(reason) or can_never_run(data.get("comment"))
    if state == "QUEUED" and can_never_run(reason):
        return (CLI_NEVER_RUNS_ADVICE if cli else NEVER_RUNS_ADVICE).format(run=run)
    if state in ("CANCELLED", "LOST") and never and "sweep" not in data:
        return (CLI_DELETED_NEVER_RUNS_ADVICE if cli else DELETED_NEVER_RUNS_ADVICE).format(run=run)
    if state == "QUEUED" and (is_held(reason) or str(data.get("note", "")).startswith("held")):
        release = RELEASE.get(getattr(job.backend, "name", ""), "the scheduler's release")
        if reason == "JobHeldAdmin" or "administrator" in str(data.get("note", "")):
            release = "ask the site's support: an administrator holds it"
        said = CLI_HELD_ADVICE if cli else HELD_ADVICE
        return said.format(run=run, release=release.format(job_id=job.job_id))
    if state == "NOT_STARTED":
        return not_started_advice(data, cli)
    variant = CLI_VARIANT_ADVICE if cli else VARIANT_ADVICE
    if data.get("sweep") and state in variant:
        return variant[state].format(run=run, sweep=str(data["sweep"]))
    advice = CLI_ADVICE if cli else ADVICE
    return advice[state].format(run=run) if state in advice else None


def not_started_advice(manifest: dict, cli: bool = False) -> str:
    """What to do about a sweep variant that never started: why (the kit's note, from its run
    directory and its scheduler), and that the sweep's resume runs it.

    >>> print(not_started_advice({"sweep": "runs/sweep_a", "note": "its job was deleted before "
    ...                           "its turn"}, cli=True))  # doctest: +NORMALIZE_WHITESPACE
    it never started: its job was deleted before its turn; hpcprof-kit sweep --resume
    runs/sweep_a runs it again, with the sweep's other variants that did not complete
    """
    why = manifest.get("note") or "it left no output and no record"
    said = CLI_NOT_STARTED_ADVICE if cli else NOT_STARTED_ADVICE
    return said.format(why=why, sweep=str(manifest.get("sweep") or "SWEEP_DIR"))


def missing_report(job) -> str | None:
    """For a job run under a vendor tracer whose ``traces/<tool>/`` holds no file: what the
    tool said in the job's output and what to do; None when there is a report, or no tracer.

    A filter that matches no kernel leaves ncu nothing to record, yet the application ends
    normally and so does the job: COMPLETED, with no report to open.
    """
    try:
        spec = job.run.spec()
    except (OSError, ValueError):
        return None
    tool = getattr(spec, "tracer", None)
    if not tool:
        return None
    folder = job.run_dir / "traces" / tool
    if folder.is_dir() and any(p.is_file() for p in folder.rglob("*")):
        return None
    said = [
        line.strip()
        for stream in ("stdout", "stderr")
        for line in job.tail(400, stream).splitlines()
        if any(mark in line for mark in TOOL_LINE_MARKS)
    ]
    kernel = (spec.env or {}).get("NCU_KERNEL")
    kernel = repr(kernel) if kernel else "as the job's environment set it, if at all"
    lines = [f"  no {tool} report: traces/{tool}/ is empty in {job.run_dir}"]
    if said:
        lines.append(f"  {tool} said:")
        lines.extend(f"    | {line}" for line in said[-5:])
    why = NO_REPORT.get(tool, "read the tool's lines in the output (job.tail(50))")
    lines.append("  what to do: " + why.format(kernel=kernel))
    return "\n".join(lines)


def wait_for(job, timeout: float | None = 600, progress: bool = True) -> str:
    """Wait for ``job`` (up to ``timeout`` s); unless it COMPLETED, print ``explain(job)``;
    if it COMPLETED under a vendor tracer that wrote no report, print ``missing_report(job)``.

    Returns the state, as ``job.wait()`` does. A job still QUEUED or RUNNING at the timeout
    keeps its place: wait again, or stop it with ``job.cancel()``.

    >>> from hpcprof_kit.jobs import JobSpec, submit
    >>> job = submit(JobSpec(system="local", command=["echo", "hi"], ranks_per_node=1))
    >>> wait_for(job, timeout=60, progress=False)
    'COMPLETED'
    """
    state = job.wait(timeout=timeout, progress=progress)
    if state in FINAL_STATES and state != "COMPLETED":
        from hpcprof_kit.jobs.late_records import settle

        settle(job)  # the scheduler's final comment and the staged stderr may come late
    if state != "COMPLETED":
        print(explain(job))
    elif (note := missing_report(job)) is not None:
        print(f"job {job.job_id} COMPLETED\n{note}")
    return state
