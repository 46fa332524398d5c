"""Submission backends behind one interface: ``local``, ``slurm``, ``pbs``.

A backend submits a run directory's ``job.sh``, reports its ``Status`` and cancels it. The
choice is data: a system's scheduler names its backend and the command that must be on PATH.

>>> from hpcprof_kit.jobs.backends import SUBMIT_COMMANDS
>>> SUBMIT_COMMANDS["pbs"]
'qsub'
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hpcprof_kit.errors import SubmitError
from hpcprof_kit.systems import System

STATES = ("QUEUED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"})
SUBMIT_COMMANDS = {"slurm": "sbatch", "pbs": "qsub", "local": "bash"}
CANCEL_MARK = "cancel_requested"  # written by the kit before it cancels, so the reason survives


@dataclass(frozen=True)
class Status:
    state: str
    exit_code: int | None = None
    hosts: tuple[str, ...] = ()
    note: str = ""


class Backend(Protocol):
    name: str
    poll_interval: float

    def submit(self, run_dir: Path, system: System, walltime_s: int) -> str: ...
    def poll(self, run_dir: Path, job_id: str) -> Status: ...
    def cancel(self, run_dir: Path, job_id: str) -> None: ...


def job_environment(run_dir: Path) -> dict[str, str]:
    """The submitting environment, with this interpreter's bin first so ``python3`` is the kit's."""
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["HPCPROF_RUN_DIR"] = str(run_dir)
    return env


def run_command(args: list[str], what: str, **kwargs) -> subprocess.CompletedProcess[str]:
    """Run a scheduler command; SubmitError carries its stderr when it fails."""
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, **kwargs)
    except FileNotFoundError:
        raise SubmitError(f"{args[0]} is not on PATH; cannot {what}") from None
    except subprocess.TimeoutExpired:
        raise SubmitError(f"{' '.join(args)} did not answer in 60 s; cannot {what}") from None
    if done.returncode != 0:
        raise SubmitError(
            f"{' '.join(args)} failed (exit {done.returncode}) while trying to {what}: "
            f"{done.stderr.strip() or done.stdout.strip()}"
        )
    return done


def get_backend(name: str) -> Backend:
    if name == "local":
        from hpcprof_kit.jobs.backends.local import LocalBackend

        return LocalBackend()
    if name == "slurm":
        from hpcprof_kit.jobs.backends.slurm import SlurmBackend

        return SlurmBackend()
    if name == "pbs":
        from hpcprof_kit.jobs.backends.pbs import PbsBackend

        return PbsBackend()
    raise SubmitError(f"backend {name!r} is unknown; use 'auto', 'local', 'slurm' or 'pbs'")


def choose_backend(system: System, backend: str = "auto") -> str:
    """The backend name for ``system``: explicit, else its scheduler if the command is on PATH.

    Inside an interactive allocation of the system's scheduler (``qsub -I``, ``salloc``) with no
    way to submit, the script runs right here: the local backend with the allocation's nodefile.
    """
    if backend != "auto":
        if backend not in SUBMIT_COMMANDS:
            raise SubmitError(
                f"backend {backend!r} is unknown; use 'auto', 'local', 'slurm' or 'pbs'"
            )
        return backend
    if system.scheduler == "none":
        return "local"
    command = SUBMIT_COMMANDS.get(system.scheduler)
    if command is None:
        raise SubmitError(f"scheduler {system.scheduler!r} of {system.name} has no backend")
    if shutil.which(command):
        return system.scheduler
    if in_allocation(system.scheduler):
        return "local"
    raise SubmitError(
        f"backend {system.scheduler!r} was expected for system {system.name}, but {command} "
        f"is not on PATH; run on a login node of {system.name}, or pass backend='local' to run "
        "the script on this machine"
    )


def in_allocation(scheduler: str) -> bool:
    """True inside a job of that scheduler (an interactive one included)."""
    if scheduler == "pbs":
        return bool(os.environ.get("PBS_NODEFILE") or os.environ.get("PBS_JOBID"))
    if scheduler == "slurm":
        return bool(os.environ.get("SLURM_JOB_ID"))
    return False
