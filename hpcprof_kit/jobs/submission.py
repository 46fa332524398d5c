"""``submit(spec)``: render, write the run directory, hand the script to a backend.

>>> from hpcprof_kit.jobs import JobSpec, submit
>>> job = submit(JobSpec(system="local", command=["true"], ranks_per_node=1))
>>> job.wait(progress=False), job.exit_code
('COMPLETED', 0)
"""

from __future__ import annotations

import os
import re

from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs.backends import SUBMIT_COMMANDS, choose_backend, get_backend
from hpcprof_kit.jobs.handle import Job
from hpcprof_kit.jobs.queues import walltime_seconds
from hpcprof_kit.jobs.render import render_script
from hpcprof_kit.jobs.rundir import RunDir, now_iso
from hpcprof_kit.jobs.spec import JobSpec
from hpcprof_kit.systems import System, load_system, system_names
from hpcprof_kit.tracers import warn_unfiltered_ncu

# What a system's script is written for, said when another scheduler's client is asked to run it.
SCRIPT_FOR = {
    "none": "this machine (no #PBS or #SBATCH lines, the files written where it starts)",
    "slurm": "Slurm (#SBATCH lines, srun)",
    "pbs": "PBS (#PBS lines, the site's mpiexec)",
}


def check_backend(system: System, backend: str) -> None:
    """SpecError when an explicit ``backend`` is another scheduler's than ``system``'s: its
    script would be handed to a client that cannot run it. ``auto`` and ``local`` always fit.

    >>> from hpcprof_kit.systems import load_system
    >>> check_backend(load_system("slurm"), "slurm")
    >>> check_backend(load_system("local"), "pbs")
    Traceback (most recent call last):
    ...
    hpcprof_kit.errors.SpecError: backend 'pbs' contradicts system 'local', whose scheduler is \
none: its script is written for this machine (no #PBS or #SBATCH lines, the files written where \
it starts), not for qsub; leave the backend at 'auto' (or pass 'local'), or pick a system whose \
scheduler is pbs (aurora, polaris)
    """
    if backend in ("auto", "local", system.scheduler) or backend not in SUBMIT_COMMANDS:
        return  # an unknown name is choose_backend's to refuse
    fitting = ", ".join(repr(b) for b in ("local", system.scheduler) if b in SUBMIT_COMMANDS)
    raise SpecError(
        f"backend {backend!r} contradicts system {system.name!r}, whose scheduler is "
        f"{system.scheduler}: its script is written for "
        f"{SCRIPT_FOR.get(system.scheduler, system.scheduler)}, not for "
        f"{SUBMIT_COMMANDS[backend]}; leave the backend at 'auto' (or pass "
        f"{fitting.replace(', ', ' or ')}), or pick a system whose scheduler is {backend} "
        f"({_systems_of(backend) or 'a site record with scheduler = ' + repr(backend)})"
    )


def _systems_of(scheduler: str) -> str:
    names = []
    for name in system_names():
        try:
            if load_system(name).scheduler == scheduler:
                names.append(name)
        except Exception:  # a broken record elsewhere must not hide this message
            continue
    return ", ".join(names)


# How run_command words a refusal, and submit() records it: "submission failed: " + that.
_REFUSED = re.compile(
    r"^submission failed: (?P<client>\S+)(?: .*?)? failed \(exit (?P<exit>-?\d+)\) "
    r"while trying to [^:]*: (?P<said>.*)\Z",
    re.DOTALL,
)


def refusal(note: str | None) -> tuple[str, int, list[str]] | None:
    """From a run's note, the scheduler client that refused the submission, its exit code and
    its own message lines; None when the note records no refusal.

    >>> refusal("submission failed: qsub -o /r/stdout -e /r/stderr job.sh failed (exit 38) "
    ...         "while trying to submit to PBS: qsub: would exceed queue generic's per-user limit")
    ('qsub', 38, ["qsub: would exceed queue generic's per-user limit"])
    """
    found = _REFUSED.match(note or "")
    if found is None:
        return None
    said = [line for line in found["said"].splitlines() if line.strip()]
    return found["client"].rsplit("/", 1)[-1], int(found["exit"]), said


def submit(
    spec: JobSpec,
    backend: str = "auto",
    runs_root: str | os.PathLike[str] | None = None,
) -> Job:
    """Submit ``spec``; the run directory keeps the exact script, the spec and a manifest."""
    resolved = spec.resolve()  # checked first: a bad spec never makes a run directory
    check_backend(resolved.system, backend)
    warn_unfiltered_ncu(spec)  # ncu on every kernel outlives most walltimes: said before it runs
    script = render_script(resolved)
    system = resolved.system
    # The environment the job activates is recorded in spec.json as in the script.
    spec = spec.with_(venv=resolved.venv)
    name = choose_backend(system, backend, nodes=spec.nodes)
    chosen = get_backend(name)
    run = RunDir.create(spec, runs_root)
    run.write_new("job.sh", script)
    run.write_new("spec.json", spec.to_json() + "\n")
    walltime_s = walltime_seconds(spec.walltime)
    run.update(
        backend=name,
        command=list(spec.full_command()),
        state="SUBMITTING",
        walltime_s=walltime_s,
        submitted_at=now_iso(),
    )
    try:
        job_id = chosen.submit(run.path, system, walltime_s)
    except Exception as exc:
        run.update(state="FAILED", note=f"submission failed: {exc}")
        raise
    run.update(job_id=job_id, state="QUEUED")
    job = Job(run, chosen, job_id)
    job.refresh()
    return job
