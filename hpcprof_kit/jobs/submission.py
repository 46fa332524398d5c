"""``submit(spec)``: render, write the run directory, hand the script to a backend.

>>> from hpcprof_kit.jobs import JobSpec, submit
>>> job = submit(JobSpec(system="local", command=["true"], ranks_per_node=1))
>>> job.wait(progress=False), job.exit_code
('COMPLETED', 0)
"""

from __future__ import annotations

import os

from hpcprof_kit.jobs.backends import choose_backend, get_backend
from hpcprof_kit.jobs.handle import Job
from hpcprof_kit.jobs.queues import walltime_seconds
from hpcprof_kit.jobs.render import render_script
from hpcprof_kit.jobs.rundir import RunDir, now_iso
from hpcprof_kit.jobs.spec import JobSpec
from hpcprof_kit.tracers import warn_unfiltered_ncu


def submit(
    spec: JobSpec,
    backend: str = "auto",
    runs_root: str | os.PathLike[str] | None = None,
) -> Job:
    """Submit ``spec``; the run directory keeps the exact script, the spec and a manifest."""
    resolved = spec.resolve()  # checked first: a bad spec never makes a run directory
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
