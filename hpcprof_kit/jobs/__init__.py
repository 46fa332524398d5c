"""Job specs, their scripts, submission (local, Slurm, PBS), job handles and run directories.

>>> from hpcprof_kit.jobs import JobSpec
>>> print(JobSpec(system="local", example="train", profile=True).render().splitlines()[-1])
    python3 -m hpcprof_kit.apps.train --profile

``submit(spec)`` starts it and returns a ``Job``; ``Job.from_run_dir(path)`` re-attaches.
"""

from __future__ import annotations

from hpcprof_kit.jobs.spec import JobSpec

__all__ = ["JobSpec", "Job", "RunDir", "submit", "STATES"]


def __getattr__(name: str):
    # Backends and handles load on first use, so rendering stays light.
    if name in ("Job", "STATES"):
        from hpcprof_kit.jobs import handle

        return getattr(handle, name)
    if name == "RunDir":
        from hpcprof_kit.jobs.rundir import RunDir

        return RunDir
    if name == "submit":
        from hpcprof_kit.jobs.submit import submit

        return submit
    raise AttributeError(f"module 'hpcprof_kit.jobs' has no attribute {name!r}")
