"""Where the kit keeps its runs: explicit argument, then $HPCPROF_RUNS_DIR, then ./runs."""

from __future__ import annotations

import os
from pathlib import Path


def runs_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The folder that holds run directories.

    >>> import os; os.environ["HPCPROF_RUNS_DIR"] = "/scratch/me/runs"
    >>> str(runs_root())
    '/scratch/me/runs'
    >>> del os.environ["HPCPROF_RUNS_DIR"]
    """
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get("HPCPROF_RUNS_DIR")
    return Path(env) if env else Path.cwd() / "runs"


# Environment variables a job script sets for the processes it starts.
RUN_DIR_VAR = "HPCPROF_RUN_DIR"  # absolute path of this run's directory
SYSTEM_VAR = "HPCPROF_SYSTEM"  # system record name


def current_run_dir() -> Path | None:
    """The run directory of the job this process belongs to, if any."""
    value = os.environ.get(RUN_DIR_VAR)
    return Path(value) if value else None
