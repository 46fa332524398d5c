"""A sweep (``hpcprof_kit.jobs.sweep.Sweep``, typed ``Any`` here: that module imports this one)
on a scheduler: one job array (Slurm ``--array``, PBS Pro ``-J``) whose index picks
the variant, or, in a queue that takes one job per user, one job running the variants in turn.

Each variant keeps its own run directory (``job.sh``, ``spec.json``, ``manifest.json``) made
before the array is submitted; the array script only chooses which one its index runs. A real
PBS counts an array of N as N jobs against a per-user limit, so where the queue's record says
``max_jobs_per_user = 1`` (ALCF's debug queues) the variants run one after another inside a
single job, and the script says why. Where the record does not say the queue's limits, the
server's own ``max_queued`` and ``max_array_size`` decide (``learn_server_limits``).

>>> from hpcprof_kit.jobs import JobSpec
>>> s = JobSpec(system="slurm", example="seqpar").sweep(nodes=[1, 2])
>>> text = array_script(s, ["/r/a", "/r/b"], [0, 1], "slurm", max_concurrent=1)
>>> [line for line in text.splitlines() if "array" in line][:2]
['#SBATCH --array=0-1%1', '#SBATCH -o array-%A_%a.out']
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs.backends.pbs_outcome import TURN
from hpcprof_kit.jobs.queues import walltime_seconds
from hpcprof_kit.jobs.rundir import RunDir, now_iso

if TYPE_CHECKING:  # pragma: no cover
    from hpcprof_kit.jobs.spec import JobSpec

# The most indices one array may hold when the system record does not say: Slurm's default
# MaxArraySize (1001: indices 0-1000), PBS Pro's default max_array_size (10000).
ARRAY_LIMITS = {"slurm": 1001, "pbs": 10000}
INDEX_VAR = {"slurm": "SLURM_ARRAY_TASK_ID", "pbs": "PBS_ARRAY_INDEX"}
DIRECTIVE = {"slurm": "#SBATCH", "pbs": "#PBS"}


def _record_rules(sweep: Any) -> tuple[dict, str]:
    sysrec = sweep.base.system_record()
    queue = sweep.base.queue if sweep.base.queue is not None else sysrec.default_queue
    rules = sysrec.extra.get("queue_rules", {})
    return {**{k: v for k, v in rules.items() if not isinstance(v, dict)},
            **rules.get(queue or "", {})}, queue or ""  # fmt: skip


def _rules(sweep: Any) -> tuple[dict, str]:
    """The queue's rules: the record's, then what the server said where the record is silent;
    of two array sizes, the smaller (a record's server-wide one, a server's own for the queue)."""
    rules, queue = _record_rules(sweep)
    told = getattr(sweep, "server_limits", None)
    if told is None:
        return rules, queue
    merged = {**told.rules(), **rules}
    if "max_array_size" in rules and told.max_array_size:
        merged["max_array_size"] = min(int(rules["max_array_size"]), told.max_array_size)
    return merged, queue


def _said(sweep: Any, rule: str) -> str:
    """The server's words for a rule in force, where its value is the server's and not the
    record's (else "")."""
    told = getattr(sweep, "server_limits", None)
    record = _record_rules(sweep)[0]
    if told is None or getattr(told, rule) is None or record.get(rule) == getattr(told, rule):
        return ""
    return told.said.get(rule, "") if _rules(sweep)[0].get(rule) == getattr(told, rule) else ""


def learn_server_limits(sweep: Any, query: Any = None) -> None:
    """Where the record does not say how many queued jobs one user may have in the sweep's
    queue, or how long an array may be, ask the PBS server (``qstat -Qf QUEUE``, ``qstat -Bf``:
    ``hpcprof_kit.jobs.server_limits``) and shape the sweep by its answer: one job running the
    variants in turn where it takes one queued job per user; SpecError, before anything is
    submitted, where the grid is longer than an array may be. A server that cannot be read
    leaves the record's rules (with one warning)."""
    from hpcprof_kit.jobs.server_limits import RULES, ask_server

    rules, queue = _record_rules(sweep)
    if not queue or all(r in rules for r in RULES) or getattr(sweep, "server_limits", None):
        return  # nothing to ask, or asked already (a preview, then the run)
    if rules.get("max_jobs_per_user") == 1:
        return  # the variants share one job, in turn: no array, so no array limit matters
    sweep.server_limits = ask_server(queue) if query is None else ask_server(queue, query)
    check_array_size(sweep)


def one_job_only(sweep: Any) -> bool:
    """Whether the sweep's queue takes one job per user (its variants then share one job)."""
    return _rules(sweep)[0].get("max_jobs_per_user") == 1


def array_limit(sweep: Any) -> int | None:
    """The most variants one array of this system and queue may hold; None without scheduler.
    A server's ``max_queued`` per user caps it too: PBS counts an array of N as N jobs."""
    scheduler = sweep.base.system_record().scheduler
    if scheduler not in ARRAY_LIMITS:
        return None
    rules = _rules(sweep)[0]
    limit = int(rules.get("max_array_size", ARRAY_LIMITS[scheduler]))
    per_user = int(rules.get("max_jobs_per_user", 0))
    return min(limit, per_user) if per_user > 1 else limit


def _limit_source(sweep: Any, limit: int) -> str:
    """The words behind an array limit: the server's, where it said it; else the record's field
    that sets it (none for the scheduler's default)."""
    rules = _rules(sweep)[0]
    if _said(sweep, "max_jobs_per_user") and rules.get("max_jobs_per_user") == limit:
        return (f"{_said(sweep, 'max_jobs_per_user')}, and PBS counts an array of N as N "
                "queued jobs")  # fmt: skip
    if _said(sweep, "max_array_size"):
        return _said(sweep, "max_array_size")
    sysrec = sweep.base.system_record()
    record, queue = sysrec.extra.get("queue_rules", {}), _record_rules(sweep)[1]
    own = record.get(queue) if isinstance(record.get(queue), dict) else {}
    where = sysrec.source or f"{sysrec.name}.toml"
    if own.get("max_jobs_per_user") == limit:
        return (f"max_jobs_per_user = {limit} under [queue_rules.{queue}] in {where}, and an "
                "array of N counts as N queued jobs")  # fmt: skip
    if own.get("max_array_size") == limit:
        return f"max_array_size = {limit} under [queue_rules.{queue}] in {where}"
    if record.get("max_array_size") == limit:
        return f"max_array_size = {limit} under [queue_rules] in {where}"
    return ""


def check_array_size(sweep: Any) -> None:
    """SpecError when the grid does not fit one array, or one job's walltime where the
    variants must run in sequence."""
    n, sysrec = len(sweep.variants), sweep.base.system_record()
    limit = array_limit(sweep)
    rules, queue = _rules(sweep)
    in_turn = rules.get("max_jobs_per_user") == 1
    # On PBS a queue that takes one job per user gets one job, not an array: no array limit.
    if limit is not None and n > limit and not (in_turn and sysrec.scheduler == "pbs"):
        source = _limit_source(sweep, limit)
        where = f"{sysrec.scheduler}: {source}" if source else sysrec.scheduler
        raise SpecError(
            f"the grid has {n} variants, more than {sysrec.name}'s array limit of {limit} "
            f"({where}); vary fewer values or split the grid into sweeps of at "
            f"most {limit}"
        )
    if limit is None or not in_turn:
        return
    from hpcprof_kit.jobs.queues import resolve_queue

    most = resolve_queue(sysrec, sweep.base.queue).max_walltime
    total = sum(walltime_seconds(v.spec.walltime) for v in sweep.variants)
    if most and total > walltime_seconds(most):
        raise SpecError(
            f"queue {queue} takes one job per user, so the {n} variants run in one job, and "
            f"their walltimes add up to {_hms(total)}, more than the queue's {most}; shorten "
            "each variant's walltime, vary fewer values, or pick a queue that takes arrays"
        )


def _hms(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _header(sweep: Any, variants: Sequence[Any], sequence: bool) -> list[str]:
    """The directives of the widest variant (most nodes and ranks, longest walltime)."""
    specs = [v.spec for v in variants]
    walls = [walltime_seconds(s.walltime) for s in specs]
    widest: JobSpec = sweep.base.with_(
        nodes=max(s.nodes for s in specs),
        ranks_per_node=max(s.ranks_per_node for s in specs),
        walltime=_hms(sum(walls) if sequence else max(walls)),
        name=f"sweep-{sweep.base.label}",
    )
    mark = DIRECTIVE[widest.system_record().scheduler]
    lines = []
    for line in widest.render().splitlines():
        if not (line.startswith("#!") or line.startswith(mark)):
            break
        if line not in (f"{mark} -o stdout", f"{mark} -e stderr"):
            lines.append(line)
    return lines


def array_script(sweep: Any, run_dirs: Sequence[str], indices: Sequence[int],
                 scheduler: str, max_concurrent: int | None = None,
                 sequence: bool = False) -> str:  # fmt: skip
    """The script of one array (or, ``sequence=True``, one job) running these variants."""
    chosen = [sweep.variants[i] for i in indices]
    lines = _header(sweep, chosen, sequence)
    mark = DIRECTIVE[scheduler]
    limit = f"%{max_concurrent}" if max_concurrent else ""
    if not sequence:
        span = f"{min(indices)}-{max(indices)}"
        if scheduler == "slurm":
            whole = len(indices) == 1 + max(indices) - min(indices)
            listed = span if whole and len(indices) > 1 else ",".join(map(str, indices))
            lines += [f"{mark} --array={listed}{limit}",
                      f"{mark} -o array-%A_%a.out", f"{mark} -e array-%A_%a.out"]  # fmt: skip
        else:
            # PBS Pro takes a range only: indices of the range not re-run say so and end. (One
            # index alone is no array: submit_array runs it as one job.)
            lines += [f"{mark} -J {span}{limit}"]
    lines += ["# A sweep of " + sweep.base.label + ": each variant runs its own job.sh in its own "
              "run directory (stdout, stderr, job_end.json there).", "set -o pipefail"]  # fmt: skip
    if sequence:
        return "\n".join(lines + _sequence_body(sweep, run_dirs)) + "\n"
    var = INDEX_VAR[scheduler]
    lines.append(f'case "${{{var}:?this script runs as a job array}}" in')
    for index, run_dir in zip(indices, run_dirs, strict=True):
        lines.append(
            f"    {index}) run_dir={shlex.quote(run_dir)} ;;  # {chosen_label(sweep, index)}"
        )
    lines += [
        f'    *) echo "array index ${var}: no variant to run (it completed before)"; exit 0 ;;',
        "esac",
        'export HPCPROF_RUN_DIR="$run_dir"',
        *_ALLOCATION_RESET.get(scheduler, ()),
        'cd "$run_dir"',
        "bash job.sh >stdout 2>stderr",
    ]
    return "\n".join(lines) + "\n"


# Every index gets the widest variant's allocation; srun would take the allocation's task count
# (SLURM_NTASKS) over the variant's own -N/--ntasks-per-node, so the variant's line decides.
_ALLOCATION_RESET = {
    "slurm": (
        "# srun takes the array's (widest) task count from these over the variant's own line",
        "unset SLURM_NTASKS SLURM_NPROCS",
    ),
}


def chosen_label(sweep: Any, index: int) -> str:
    return sweep.variants[index].label


def _sequence_body(sweep: Any, run_dirs: Sequence[str]) -> list[str]:
    _, queue = _rules(sweep)
    why = [f"# Queue {queue} takes one job per user, and PBS counts an array of N as N jobs: the",
           f"# {len(run_dirs)} variants run one after another inside this single job."]  # fmt: skip
    if _said(sweep, "max_jobs_per_user"):  # the record does not say it: name the server's words
        why.append(f"# ({_said(sweep, 'max_jobs_per_user')}; the system record does not say.)")
    if not one_job_only(sweep):
        why = ["# One variant to run: a plain job (a PBS Pro array holds at least two indices)."]
    return [
        *why,
        "# Each variant claims its turn file first (created once): one the user cancelled",
        "# before its turn holds 'skipped' and is passed over; the others still run.",
        "rc=0",
        "for run_dir in " + " ".join(shlex.quote(d) for d in run_dirs) + "; do",
        f'    if ! (set -C; echo started >"$run_dir/{TURN}") 2>/dev/null; then',
        '        echo "skipped $run_dir: cancelled before its turn"; continue',
        "    fi",
        '    (export HPCPROF_RUN_DIR="$run_dir"; cd "$run_dir" && bash job.sh >stdout 2>stderr)'
        " || rc=1",
        "done",
        'exit "$rc"',
    ]


def _prepare(sweep: Any, v: Any, backend: str, note: str) -> RunDir:
    """The variant's run directory as ``submit`` makes one, before the array is submitted."""
    from hpcprof_kit.jobs.render import render_script

    resolved = v.spec.resolve()
    spec = v.spec.with_(venv=resolved.venv)
    run = RunDir.create(spec, sweep.path)
    run.write_new("job.sh", render_script(resolved))
    run.write_new("spec.json", spec.to_json() + "\n")
    run.update(backend=backend, command=list(spec.full_command()), state="SUBMITTING",
               walltime_s=walltime_seconds(spec.walltime), submitted_at=now_iso(),
               sweep=str(sweep.path), sweep_index=v.index, note=note)  # fmt: skip
    sweep.mark(v.index, run_dir=run.path.name, state="SUBMITTING")
    return run


def submit_array(sweep: Any, todo: Sequence[Any], backend: str,
                 max_concurrent: int | None = None) -> str:  # fmt: skip
    """Submit the pending variants as one array (or one job); the scheduler's job id."""
    from hpcprof_kit.jobs.backends import job_environment, run_command

    assert sweep.path is not None
    sequence = backend == "pbs" and (one_job_only(sweep) or len(todo) == 1)
    how = "one job, variants in turn" if sequence else f"array index {{}} of {backend}"
    runs = [_prepare(sweep, v, backend, how.format(v.index)) for v in todo]
    indices = [v.index for v in todo]
    script = array_script(sweep, [str(r.path) for r in runs], indices, backend,
                          max_concurrent, sequence)  # fmt: skip
    name = _fresh(sweep.path, "array", ".sh")
    with open(sweep.path / name, "x", encoding="utf-8") as fh:
        fh.write(script)
    command = ["sbatch", "--parsable", name] if backend == "slurm" else ["qsub", name]
    try:
        done = run_command(command, f"submit the sweep to {backend}", cwd=sweep.path,
                           env=job_environment(sweep.path))  # fmt: skip
    except Exception as exc:
        for v, run in zip(todo, runs, strict=True):
            run.update(state="FAILED", note=f"submission failed: {exc}")
            sweep.mark(v.index, state="FAILED")
        raise
    job_id = done.stdout.strip().split(";")[0]
    for v, run in zip(todo, runs, strict=True):
        own = job_id if sequence else _element(backend, job_id, v.index)
        run.update(job_id=own, state="QUEUED", array_job_id=job_id, in_turn=sequence)
        sweep.mark(v.index, job_id=own, state="QUEUED", script=name)
    return job_id


def _element(backend: str, job_id: str, index: int) -> str:
    """One index's job id: Slurm ``12_3``; PBS Pro ``12[3].server`` of ``12[].server``."""
    if backend == "slurm":
        return f"{job_id}_{index}"
    return job_id.replace("[]", f"[{index}]", 1)


def _fresh(folder: Path, stem: str, suffix: str) -> str:
    """A file name not taken yet in ``folder``: ``array.sh``, ``array-1.sh``..."""
    for k in range(1000):
        name = f"{stem}{'' if k == 0 else f'-{k}'}{suffix}"
        if not (folder / name).exists():
            return name
    raise SpecError(f"{folder} holds 1000 {stem} scripts already; start a new sweep")
