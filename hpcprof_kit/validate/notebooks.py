"""``validate()``: the instructor's entry point, here (``system="local"``, one pytest process
per notebook, :mod:`hpcprof_kit.validate.run`) or as a batch job on an HPC system
(:mod:`hpcprof_kit.validate.batch`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from hpcprof_kit.validate.batch import validate_as_job
from hpcprof_kit.validate.run import NotebookResult, find_notebooks, validate_notebook


def validate(
    notebooks: Iterable[str | os.PathLike[str]] | None = None,
    system: str = "local",
    timeout: float = 600.0,
    *,
    cell_timeout: float | None = None,
    on_result: Callable[[NotebookResult], None] | None = None,
    **spec_fields: Any,
) -> list[NotebookResult]:
    """Validate notebooks here (``system="local"``) or as a batch job on an HPC system.

    Every notebook runs even when an earlier one fails; ``on_result`` sees each verdict as
    it arrives. On another system the validation is submitted through the jobs layer (with
    ``spec_fields`` such as ``account="MYPROJ"``, ``queue="debug"``) and the per-notebook
    verdicts are read back from the run directory when the job ends.

    >>> results = validate(["notebooks/00_quickstart.ipynb"], timeout=300)   # doctest: +SKIP
    >>> all(r.ok for r in results)                                          # doctest: +SKIP
    True
    """
    paths = find_notebooks(notebooks)
    if system != "local":
        return validate_as_job(
            paths, system=system, timeout=timeout, on_result=on_result, **spec_fields
        )
    results = []
    for path in paths:
        result = validate_notebook(path, timeout=timeout, cell_timeout=cell_timeout)
        if on_result is not None:
            on_result(result)
        results.append(result)
        if result.result == "no-env":
            break  # every other notebook would fail the same way
    return results
