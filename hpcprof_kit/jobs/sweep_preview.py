"""A sweep shown before it runs: its variants, with the command each one's ranks run, and the
script the scheduler would get (the array script; locally, the first variant's own job.sh).
Nothing is submitted and nothing is written: the run directories the array script names are
made at submission, so the preview names them ``<sweep>/<run of variant N>``.

>>> from hpcprof_kit.jobs import JobSpec
>>> sweep = JobSpec(system="local", example="seqpar").sweep(**{"--seed": ["0", "1"]})
>>> print(preview(sweep).split("\\n#!")[0])
sweep of seqpar on local: 2 variants, run one after another on this machine
(a preview: nothing is run and nothing is written)
  0  --seed=0  python3 -m hpcprof_kit.apps.seqpar --seed 0
  1  --seed=1  python3 -m hpcprof_kit.apps.seqpar --seed 1
each variant runs its own job.sh in its own run directory; variant 0's:
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Sequence
from typing import Any

from hpcprof_kit.errors import SpecError

__all__ = ["preview", "preview_backend"]

CLIENT = {"slurm": "sbatch", "pbs": "qsub"}
SCHEDULER = {"slurm": "Slurm", "pbs": "PBS"}


def preview_backend(sweep: Any, backend: str = "auto") -> str:
    """The backend a preview shows: as given, else the system's scheduler (``local`` where it
    has none). Unlike a run, it needs no scheduler client here."""
    from hpcprof_kit.jobs.submission import check_backend

    sysrec = sweep.base.system_record()
    check_backend(sysrec, backend)
    if backend not in ("auto", "local", "slurm", "pbs"):
        raise SpecError(f"backend {backend!r} is unknown; use 'auto', 'local', 'slurm' or 'pbs'")
    if backend != "auto":
        return backend
    return "local" if sysrec.scheduler == "none" else sysrec.scheduler


def preview(sweep: Any, backend: str = "auto", variants: Sequence[Any] | None = None,
            max_concurrent: int | None = None) -> str:  # fmt: skip
    """The text ``hpcprof-kit sweep --dry-run`` prints for ``variants`` (default: all)."""
    from hpcprof_kit.jobs.sweep_array import array_script, one_job_only

    todo = list(sweep.variants if variants is None else variants)
    if not todo:
        return f"sweep {sweep.path}: every variant completed or is still going; nothing to run\n"
    name = preview_backend(sweep, backend)
    if name == "pbs" and shutil.which("qstat"):  # on the cluster: its limits, as a run reads them
        from hpcprof_kit.jobs.sweep_array import learn_server_limits

        learn_server_limits(sweep)
    base = sweep.base
    sequence = name == "pbs" and (one_job_only(sweep) or len(todo) == 1)
    if name == "local":
        how = "run one after another on this machine"
    elif sequence:
        how = f"one {SCHEDULER[name]} job running them in turn ({CLIENT[name]})"
    else:
        how = f"one {SCHEDULER[name]} job array ({CLIENT[name]})"
    lines = [
        f"sweep of {base.label} on {base.system}: {len(todo)} variant"
        f"{'s' if len(todo) != 1 else ''}, {how}",
        "(a preview: nothing is run and nothing is written)",
        *_flag_lines(sweep),
        *_variant_lines(todo),
    ]
    if name == "local":
        lines.append("each variant runs its own job.sh in its own run directory; variant "
                     f"{todo[0].index}'s:")  # fmt: skip
        return "\n".join(lines) + "\n" + todo[0].spec.render()
    run_dirs = [f"<sweep>/<run of variant {v.index}>" for v in todo]
    script = array_script(sweep, run_dirs, [v.index for v in todo], name, max_concurrent, sequence)
    lines.append("the script submitted (array.sh in the sweep directory; each variant's run "
                 "directory is made at submission):")  # fmt: skip
    return "\n".join(lines) + "\n" + script


def _flag_lines(sweep: Any) -> list[str]:
    """The job flags a resume gives its variants (recorded in sweep.json once they run)."""
    flags = getattr(sweep, "job_flags", None)
    if not flags:
        return []
    words = " ".join(f"--{k.replace('_', '-')} {shlex.quote(str(v))}" for k, v in flags.items())
    return [f"job flags for the variants it runs again: {words} (kept in sweep.json when they run)"]


def _variant_lines(todo: Sequence[Any]) -> list[str]:
    digits, width = len(str(max(v.index for v in todo))), max(len(v.label) for v in todo)
    return [
        f"  {v.index:>{digits}}  {v.label:<{width}}  {shlex.join(v.spec.full_command())}".rstrip()
        for v in todo
    ]
