"""Instructor validation: run every notebook under nbval, one pytest process per notebook.

One failing notebook is reported with its name, failing cell and error line, and the others
still run. The same nbval options as ``make test`` are used (lax mode, the current environment,
the sanitize file beside the notebooks).

>>> from hpcprof_kit.validate import validate, results_table    # doctest: +SKIP
>>> results = validate(["notebooks/00_quickstart.ipynb"])        # doctest: +SKIP
>>> print(results_table(results))                                # doctest: +SKIP
notebook             result  seconds  failing cell  error
00_quickstart.ipynb  passed     12.5

Cleanliness checks and the output stripper live in :mod:`hpcprof_kit.validate.clean`; the
batch-job route for HPC systems in :mod:`hpcprof_kit.validate.batch`.
"""

from __future__ import annotations

from hpcprof_kit.validate.notebooks import validate
from hpcprof_kit.validate.run import (
    DOCTOR_FIX,
    NotebookResult,
    find_notebooks,
    results_table,
    validate_notebook,
)

__all__ = [
    "DOCTOR_FIX",
    "NotebookResult",
    "find_notebooks",
    "results_table",
    "validate",
    "validate_notebook",
]
