"""Validation on an HPC system: the same ``hpcprof-kit validate`` run inside a batch job.

The job runs one process on one compute node, writes the per-notebook verdicts as JSON into
its run directory (``tables/validation.json``), and the login side reads them back.

>>> from hpcprof_kit.validate.batch import validation_job_spec
>>> spec = validation_job_spec(["/home/me/kit/notebooks/00_quickstart.ipynb"],
...                            system="aurora", account="MYPROJ")
>>> spec.full_command()[:3]
('hpcprof-kit', 'validate', '--notebooks')
>>> spec.full_command()[-2:]
('--report', 'tables/validation.json')
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import SubmitError
from hpcprof_kit.validate.run import NotebookResult

REPORT = "tables/validation.json"  # relative to the run directory, where the job script cds


def validation_job_spec(
    notebooks: Sequence[str | os.PathLike[str]],
    system: str,
    *,
    timeout: float = 600.0,
    walltime: str = "01:00:00",
    **spec_fields: Any,
):
    """The JobSpec of a validation job: one rank on one node running ``hpcprof-kit validate``.

    Notebook paths become absolute, because the job starts in its own run directory.
    ``spec_fields`` (account, queue, filesystems, ...) pass through to ``JobSpec``.
    """
    from hpcprof_kit.jobs import JobSpec

    paths = [str(Path(n).resolve()) for n in notebooks]
    command = ["hpcprof-kit", "validate", "--notebooks", *paths]
    command += ["--timeout", f"{timeout:g}", "--report", REPORT]
    return JobSpec.for_workshop(
        system=system,
        example="train",  # only names the run directory; the command replaces the app
        name="hpcprof-validate",
        command=command,
        nodes=1,
        ranks_per_node=1,
        walltime=walltime,
        **spec_fields,
    )


def read_report(path: str | os.PathLike[str]) -> list[NotebookResult]:
    """The verdicts a validation run wrote with ``--report``."""
    rows = json.loads(Path(path).read_text(encoding="utf-8"))
    return [NotebookResult(**row) for row in rows]


def validate_as_job(
    notebooks: Sequence[str | os.PathLike[str]],
    *,
    system: str,
    timeout: float = 600.0,
    on_result: Callable[[NotebookResult], None] | None = None,
    progress: bool = False,
    **spec_fields: Any,
) -> list[NotebookResult]:
    """Submit the validation to ``system``'s scheduler, wait for it, return its verdicts.

    ``progress=True`` shows the job's progress bar (queue time included) while it waits.
    """
    from hpcprof_kit.jobs import submit

    spec = validation_job_spec(notebooks, system, timeout=timeout, **spec_fields)
    job = submit(spec)
    job.wait(progress=progress)
    report = Path(job.run_dir) / REPORT
    if not report.is_file():
        raise SubmitError(
            f"validation job {job.run_dir.name} ended {job.state} without {REPORT}; "
            f"read {job.run_dir}/stderr (last lines: {job.tail()!r}) and run "
            "`hpcprof-kit doctor` on a compute node"
        )
    results = read_report(report)
    for result in results:
        if on_result is not None:
            on_result(result)
    return results
