"""How a PBS job, or one variant of a sweep, ended: its own record first, then the server's
word read through every deletion path a real OpenPBS server takes.

The server's word is not always about this run (OpenPBS 23.06, seen on a real server):

- ``qdel 'N[]'`` rewrites the subjobs that had already finished to ``Exit_status`` 1,
  substate 91, "Subjob finished", although they ended 0;
- a queued subjob deleted reads ``X`` with no ``Exit_status`` while its array lives, and ``F``,
  ``Exit_status`` 0, "Subjob finished" once the array has ended: it never ran;
- a job running several variants in turn has one ``Exit_status`` for them all (1 if any
  failed, -29 at the walltime);
- with job history off a finished subjob reads ``X``, ``Exit_status`` 1 while its array lives
  and is unknown after; a finished job is forgotten, and only PBS's stderr line
  (``=>> PBS: job killed: walltime ...``) says the walltime ended it.

So a variant's record decides (exit 0: COMPLETED; 1-128 without a signal: FAILED with its
code); a record of a signal (143 / 15) asks the server, then PBS's stderr line, then the
kit's accepted cancel; where none of them can say (history off), a SIGTERM is FAILED with a
note that names the causes it could have had and that PBS kept no record, unless the array (or
the job running the variants in turn) is gone while later variants of it never started: only
a deletion of the whole array (or job) does that, so it is CANCELLED (a walltime or the
program's own exit ends one variant, not the ones queued after it); a variant with no record
and no output never started: NOT_STARTED, which a sweep's ``--resume`` runs again.

>>> ended = Status("CANCELLED", 1, (), "deleted (qdel)", "Subjob finished")
>>> settle(JobEnd(0), ended, Evidence(variant=True)).state  # qdel 'N[]' rewrote it
'COMPLETED'
>>> settle(None, Status("ENDED"), Evidence(variant=True, started=False)).state
'NOT_STARTED'
>>> settle(JobEnd(143, signal=15), Status("ENDED"),
...        Evidence(walltime_line="=>> PBS: job killed: walltime 37 exceeded limit 25")).state
'TIMEOUT'
>>> settle(JobEnd(143, signal=15), Status("ENDED"), Evidence(variant=True)).state
'FAILED'
>>> settle(JobEnd(143, signal=15), Status("ENDED"), Evidence(variant=True, dropped=(2, 3))).state
'CANCELLED'
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from hpcprof_kit.jobs.backends import FINAL_STATES, Status, cancel_accepted
from hpcprof_kit.jobs.backends.outcome import (
    ENDED,
    JOB_END,
    JobEnd,
    decided_by_record,
    from_exit_code,
    judge,
    read_job_end,
    signal_note,
)

# The file a variant of a shared (in-turn) job claims when its turn comes ("started"), or
# the kit claims when the user cancels it before then ("skipped"); created once (O_EXCL), so
# the job and the kit never both win.
TURN = "turn"
WALLTIME_LINE = re.compile(r"=>> PBS: job killed: walltime \d+ exceeded limit \d+")
IN_TURN_NOTE = "one job, variants in turn"
SIGTERM = 15


@dataclass(frozen=True)
class Evidence:
    """What the run directory says besides the record: what the kit did, whether the script
    began, and how the variant shares its job."""

    cancelled: bool = False  # the kit deleted it (its qdel, accepted by the server)
    skipped: bool = False  # cancelled before its turn in a shared job
    started: bool = True  # its script began (a record, its stdout, a claimed turn)
    variant: bool = False  # a sweep variant (an array subjob, or a turn of a shared job)
    in_turn: bool = False  # shares one job with other variants
    walltime_line: str = ""  # PBS's own line, where the job's stderr holds it
    # the variants of its array (or shared job) that never started, after the last one that
    # did (the kit's own cancels apart), once the server has forgotten the job
    dropped: tuple[int, ...] = ()


def read_manifest(run_dir: Path) -> dict:
    try:
        data = json.loads((Path(run_dir) / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def in_turn(manifest: dict) -> bool:
    """Whether the run is one variant of a job that runs its sweep's variants in turn."""
    return bool(manifest.get("in_turn")) or str(manifest.get("note", "")).startswith(IN_TURN_NOTE)


def turn_of(run_dir: Path) -> str:
    """'started', 'skipped' or '' (the turn is not claimed yet)."""
    try:
        return (Path(run_dir) / TURN).read_text().strip()
    except OSError:
        return ""


def claim_turn(run_dir: Path, word: str) -> bool:
    """Claim the variant's turn with ``word``; False when it was claimed already."""
    try:
        fd = os.open(Path(run_dir) / TURN, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as fh:
        fh.write(word + "\n")
    return True


def walltime_line(run_dir: Path, manifest: dict) -> str:
    """PBS's walltime line from the run's stderr, or, for a sweep variant, from the array's
    (or the shared job's) own error file in the sweep directory."""
    places = [Path(run_dir) / "stderr"]
    sweep, parent = manifest.get("sweep"), str(manifest.get("array_job_id") or "")
    if sweep and parent:
        seq = parent.split(".")[0].rstrip("[]")
        tail = f".e{seq}" if in_turn(manifest) else f".e{seq}.{manifest.get('sweep_index')}"
        places += sorted(Path(sweep).glob(f"*{tail}"))
    for place in places:
        try:
            with open(place, "rb") as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - 65536))
                found = WALLTIME_LINE.search(fh.read().decode(errors="replace"))
        except OSError:
            continue
        if found:
            return found.group(0)
    return ""


def gather(run_dir: Path, record: JobEnd | None) -> Evidence:
    """The evidence a run directory holds now."""
    manifest = read_manifest(run_dir)
    variant = "sweep_index" in manifest
    turn = turn_of(run_dir)
    started = (
        not variant
        or record is not None
        or turn == "started"
        or (Path(run_dir) / "stdout").exists()
    )
    return Evidence(
        cancelled=cancel_accepted(run_dir),
        skipped=turn == "skipped",
        started=started,
        variant=variant,
        in_turn=variant and in_turn(manifest),
        walltime_line=walltime_line(run_dir, manifest),
    )


def dropped_variants(run_dir: Path) -> tuple[int, ...]:
    """The variants of the run's array (or of the job running them in turn) that never
    started, after the last one that did; those the kit cancelled or skipped are left out.
    PBS starts an array's subjobs in index order (a shared job its variants in turn), so once
    the array has ended such variants were dropped by a deletion of the whole array (a
    variant deleted alone while queued lies before one that ran after it)."""
    manifest = read_manifest(run_dir)
    sweep, parent = manifest.get("sweep"), manifest.get("array_job_id")
    if not sweep or not parent:
        return ()
    started, never = [], []
    for path in Path(sweep).iterdir():
        data = read_manifest(path)
        if data.get("array_job_id") != parent or "sweep_index" not in data:
            continue
        index, turn = int(data["sweep_index"]), turn_of(path)
        if read_job_end(path) is not None or turn == "started" or (path / "stdout").exists():
            started.append(index)
        elif turn != "skipped" and not cancel_accepted(path):
            never.append(index)
    last = max(started, default=-1)
    return tuple(sorted(i for i in never if i > last))


def deleted_with_its_job(ev: Evidence) -> str:
    """The note of a SIGTERM that the end of its array (or shared job) before later variants
    started shows to be a deletion of the whole, where PBS kept no record of it.

    >>> print(deleted_with_its_job(Evidence(variant=True, dropped=(2, 3))))
    ... # doctest: +NORMALIZE_WHITESPACE
    deleted (qdel) with its array while it ran: job_end.json: killed by signal 15 (SIGTERM);
    PBS kept no record of it (no job history), but the array ended before variants 2, 3 ever
    started, which only a deletion of the array does (a walltime or the program's own exit
    ends one subjob, not the ones queued after it)
    """
    names = ", ".join(map(str, ev.dropped))
    which = f"variant{'s' if len(ev.dropped) > 1 else ''} {names}"
    if ev.in_turn:
        head, whole = "deleted (qdel) with the job running it in turn", "the job"
        why = ("the program's own exit leaves the later variants to run, and the walltime "
               "leaves its line in the job's stderr")  # fmt: skip
    else:
        head, whole = "deleted (qdel) with its array while it ran", "the array"
        why = "a walltime or the program's own exit ends one subjob, not the ones queued after it"
    return (f"{head}: {JOB_END}: {signal_note(SIGTERM)}; PBS kept no record of it (no job "
            f"history), but {whole} ended before {which} ever started, which only a deletion "
            f"of {whole} does ({why})")  # fmt: skip


def settle(record: JobEnd | None, answer: Status, ev: Evidence) -> Status:
    """One state from the run's own record, the server's answer and the evidence."""
    if record is None and ev.skipped:
        return Status("CANCELLED", None, (),
                      "cancelled before its turn: the job passes this variant over")  # fmt: skip
    if record is not None and record.killed_by is None:
        return _by_record(record, answer, ev)
    if record is not None:
        return _by_signal(record, answer, ev)
    if answer.state not in FINAL_STATES and answer.state != ENDED:
        if ev.in_turn and answer.state == "RUNNING" and not ev.started:
            return Status("QUEUED", None, (), "waits for its turn: its job runs the sweep's "
                          "variants one after another", answer.comment)  # fmt: skip
        return answer
    if not ev.started:
        return _never_started(answer, ev)
    said = answer.state in ("TIMEOUT", "CANCELLED") or ev.walltime_line or ev.cancelled
    if ev.in_turn and not said:
        return Status("LOST", None, answer.hosts, f"its turn began (stdout) but it left no "
                      f"{JOB_END}, and its job's Exit_status is shared by all its variants")  # fmt: skip
    if answer.state in (ENDED, "FAILED") and ev.walltime_line:
        return Status("TIMEOUT", answer.exit_code, answer.hosts, _walltime_note(ev))
    return judge(None, answer, ev.cancelled)


def _by_record(record: JobEnd, answer: Status, ev: Evidence) -> Status:
    """A record with no signal: exit 0 or the script's own failure."""
    if not ev.variant:
        return judge(record, answer, ev.cancelled)  # a plain job: its server speaks of it alone
    if answer.state == "QUEUED" and not ev.in_turn:
        return answer  # requeued: the record is from an earlier run
    own = decided_by_record(record) or from_exit_code(0, answer.hosts, f"exit code from {JOB_END}")
    said = answer.state if answer.state != ENDED else ""
    if said in FINAL_STATES and (said, answer.exit_code) != (own.state, own.exit_code):
        if ev.in_turn:
            why = "its job's Exit_status is shared by every variant it ran"
        elif said == "CANCELLED":
            why = "PBS rewrites a finished subjob when its array is deleted"
        else:
            why = ("PBS shows a finished subjob's Exit_status as 1 while its array lives "
                   "when it keeps no job history")  # fmt: skip
        code = "" if answer.exit_code is None else f" {answer.exit_code}"
        return replace(own, hosts=answer.hosts,
                       note=f"{own.note}; PBS said {said}{code}, not this run's word: {why}")  # fmt: skip
    return replace(own, hosts=answer.hosts)


def _by_signal(record: JobEnd, answer: Status, ev: Evidence) -> Status:
    """A record of a signal (the trap's 143 / 15): PBS, its stderr line, the kit's mark."""
    sig = record.killed_by
    if not ev.variant and answer.state != ENDED:
        return judge(record, answer, ev.cancelled)  # the server still knows this job alone
    if answer.state in ("QUEUED", "RUNNING"):
        return answer  # the server has not finished the job yet (E: it kills the rest)
    if answer.state in ("TIMEOUT", "CANCELLED"):
        return replace(answer, exit_code=answer.exit_code if answer.exit_code is not None
                       else record.exit_code)  # fmt: skip
    pbs_own = answer.exit_code is not None and (answer.exit_code < 0 or answer.exit_code > 256)
    if answer.state == "FAILED" and pbs_own:
        return answer  # PBS killed it (in turn: the variant then running) for memory, cput...
    if ev.walltime_line:
        return Status("TIMEOUT", record.exit_code, answer.hosts, _walltime_note(ev))
    if ev.cancelled:
        return Status("CANCELLED", record.exit_code, answer.hosts,
                      f"cancelled by the kit (qdel); {JOB_END}: {signal_note(sig)}")  # fmt: skip
    if sig == SIGTERM and ev.dropped:
        return Status("CANCELLED", record.exit_code, answer.hosts, deleted_with_its_job(ev))
    if sig == SIGTERM:
        return Status("FAILED", record.exit_code, answer.hosts, sigterm_unknown_cause(record))
    return judge(record, Status(ENDED, hosts=answer.hosts, note=answer.note), ev.cancelled)


def sigterm_unknown_cause(record: JobEnd) -> str:
    """The note for a SIGTERM whose cause PBS kept no record of (no job history): a qdel, the
    walltime and the program itself all leave the same record, and only the first two are
    the scheduler's to tell.

    >>> print(sigterm_unknown_cause(JobEnd(143, signal=15)))  # doctest: +NORMALIZE_WHITESPACE
    exit code 143, killed by signal 15 (SIGTERM) (job_end.json); the cause is unknown: a qdel,
    the walltime (but PBS wrote no walltime line) or the program itself exiting 143 all leave
    this record, and PBS kept no record of the job (no job history) to tell which
    """
    return (f"exit code {record.exit_code}, {signal_note(SIGTERM)} ({JOB_END}); the cause is "
            "unknown: a qdel, the walltime (but PBS wrote no walltime line) or the program "
            f"itself exiting {record.exit_code} all leave this record, and PBS kept no record "
            "of the job (no job history) to tell which")  # fmt: skip


def _never_started(answer: Status, ev: Evidence) -> Status:
    """No record and no output: a plain job as before (CANCELLED before it ran, or LOST); a
    sweep variant NOT_STARTED, unless the kit cancelled it."""
    if not ev.variant:
        return judge(None, answer, ev.cancelled)
    if ev.cancelled:
        return Status("CANCELLED", None, answer.hosts, "cancelled by the kit before it ran")
    if ev.in_turn:
        why = {"TIMEOUT": "the walltime ended its job during an earlier variant",
               "CANCELLED": "its job was deleted before its turn"}.get(
            answer.state, "its job ended before its turn")  # fmt: skip
    elif answer.state == ENDED and not answer.comment:
        why = "PBS no longer knows the subjob (no job history), and it left no output"
    elif answer.state == "CANCELLED":  # qdel 'N[]': a subjob deleted alone is never substate 91
        why = "PBS deleted its array (qdel) before this subjob ran: no output, no record"
    else:
        why = "PBS ended the subjob before it ran (deleted while queued): no output, no record"
    return Status("NOT_STARTED", None, (), why, answer.comment)


def _walltime_note(ev: Evidence) -> str:
    return f"PBS's walltime: its stderr says {ev.walltime_line!r}"


def judge_run(run_dir: Path, answer: Status, forgotten: bool = False) -> Status:
    """:func:`settle` with the record and evidence read from the run directory now;
    ``forgotten``: the server no longer knows the job (with a variant's, its whole array or
    shared job has ended), so the variants it never started are evidence too."""
    record = read_job_end(run_dir)
    ev = gather(run_dir, record)
    if forgotten and ev.variant and record is not None and record.killed_by == SIGTERM:
        ev = replace(ev, dropped=dropped_variants(run_dir))
    return settle(record, answer, ev)
