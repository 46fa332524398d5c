"""Job specs, their scripts, submission (local, Slurm, PBS), job handles and run directories.

>>> from hpcprof_kit.jobs import JobSpec
>>> print(JobSpec(system="local", example="train", profile=True).render().splitlines()[-1])
    python3 -m hpcprof_kit.apps.train --profile

``submit(spec)`` starts it and returns a ``Job``; ``Job.from_run_dir(path)`` re-attaches;
``wait_for(job)`` waits and, unless it COMPLETED, prints what happened and what to do;
``spec.sweep(nodes=[1, 2])`` makes a ``Sweep`` of variants (``hpcprof_kit.jobs.sweep``).
"""

from __future__ import annotations

from hpcprof_kit.jobs.backends import FINAL_STATES, STATES
from hpcprof_kit.jobs.explain import explain, wait_for
from hpcprof_kit.jobs.handle import Job
from hpcprof_kit.jobs.rundir import RunDir, list_runs
from hpcprof_kit.jobs.spec import JobSpec
from hpcprof_kit.jobs.submission import submit
from hpcprof_kit.jobs.sweep import Sweep

__all__ = [
    "FINAL_STATES",
    "STATES",
    "Sweep",
    "Job",
    "JobSpec",
    "RunDir",
    "explain",
    "list_runs",
    "submit",
    "wait_for",
]
