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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hpcprof_kit.errors import SubmitError
from hpcprof_kit.systems import System

# LOST: the job's process or scheduler record is gone and the job left no exit record; the
# manifest's note says which. NOT_STARTED: a sweep variant whose job ended (or was deleted)
# before the variant's script began: no record, no output; a sweep's --resume runs it.
STATES = ("QUEUED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "LOST",
          "NOT_STARTED")  # fmt: skip
FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "LOST", "NOT_STARTED"})
SUBMIT_COMMANDS = {"slurm": "sbatch", "pbs": "qsub", "local": "bash"}
# Written by the kit before it asks the scheduler to cancel (a job can end on the SIGTERM
# before the command returns); the manifest's ``cancel`` then says what the scheduler answered.
# Only an accepted cancel counts as the kit's: the intent alone never makes a job CANCELLED.
CANCEL_MARK = "cancel_requested"
# A scheduler command that has not answered in this long counts as "not answering".
COMMAND_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Status:
    state: str
    exit_code: int | None = None
    hosts: tuple[str, ...] = ()
    note: str = ""
    comment: str = ""  # the scheduler's own word on the job (PBS ``comment``), kept as it is


# A queued job whose scheduler comment starts so will never start: a wait for it ends.
NEVER_RUNS = "Can Never Run"
# Slurm keeps such a job pending for good (squeue(1): the partition's limits exclude it).
SLURM_NEVER_RUNS = ("PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit")


def can_never_run(reason: str | None) -> bool:
    """Whether a queued job's scheduler reason says it can never start as asked: PBS's
    ``Can Never Run: ...`` comment, or Slurm's partition-limit reasons.

    >>> can_never_run("Can Never Run: Not enough total nodes available"), can_never_run("Priority")
    (True, False)
    >>> can_never_run("PartitionNodeLimit")
    True
    """
    return bool(reason) and (reason.startswith(NEVER_RUNS) or reason in SLURM_NEVER_RUNS)


# A job its owner or an administrator holds waits for a release, not for nodes: PBS's
# ``job_state`` H (comment "Job held by USER on ..."), Slurm's pending reasons below.
PBS_HELD = "Job held by"
SLURM_HELD = ("JobHeldUser", "JobHeldAdmin")
HELD_NOTE = "held: it waits for a release ({release}), not for nodes"
RELEASE = {"pbs": "qrls {job_id}", "slurm": "scontrol release {job_id}"}


def is_held(reason: str | None) -> bool:
    """Whether a queued job's scheduler reason says it is held.

    >>> is_held("Job held by pbsuser on Thu Nov 26 10:00:00 2026"), is_held("JobHeldUser")
    (True, True)
    >>> is_held("Resources"), is_held(None)
    (False, False)
    """
    return bool(reason) and (reason.startswith(PBS_HELD) or reason in SLURM_HELD)


def held_note(scheduler: str) -> str:
    """The note of a held job: how its scheduler releases it.

    >>> held_note("pbs")
    'held: it waits for a release (qrls), not for nodes'
    """
    return HELD_NOTE.format(release=RELEASE[scheduler].split(" {")[0])


class SchedulerNotAnswering(Exception):
    """The scheduler could not be asked (a command failed or timed out) or gave a state the kit
    cannot map: the job keeps its last known state and is asked again later."""

    def __init__(self, detail: str, what: str = "scheduler not answering") -> None:
        super().__init__(f"{what}: {detail}")
        self.what, self.detail = what, detail


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


def ask_to_cancel(run_dirs: list[Path], args: list[str], what: str) -> None:
    """Run the scheduler's cancel command (``qdel ID``, ``scancel ID``) for the runs in
    ``run_dirs``: each gets the cancel mark first, then, in its manifest's ``cancel``, when it
    was asked, the command, its exit code and what it said. SubmitError when the scheduler
    refused or gave no answer: the job was not cancelled by the kit, and its state keeps
    coming from its own record and the scheduler."""
    from hpcprof_kit.jobs.rundir import RunDir, now_iso

    asked = {"asked_at": now_iso(), "command": " ".join(args)}
    for run_dir in run_dirs:
        (run_dir / CANCEL_MARK).touch()
        RunDir(run_dir).update(cancel=asked)
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=60)
        code, said = done.returncode, (done.stderr.strip() or done.stdout.strip())
    except FileNotFoundError:
        code, said = None, f"{args[0]} is not on PATH"
    except subprocess.TimeoutExpired:
        code, said = None, "no answer in 60 s"
    said = "; ".join(line.strip() for line in said.splitlines() if line.strip())
    answer = {**asked, "exit_code": code, "said": said, "accepted": code == 0,
              "text": cancel_text(asked["asked_at"], args[0], said, code)}  # fmt: skip
    for run_dir in run_dirs:
        RunDir(run_dir).update(cancel=answer)
    if code != 0:
        raise SubmitError(
            f"{what}: {answer['text']}. The job was not cancelled: it runs on, and its state "
            f"comes from its own record and the scheduler (hpcprof-kit status {run_dirs[0]}); "
            "cancel again once the scheduler answers"
        )


def cancel_text(asked_at: str, client: str, said: str, code: int | None) -> str:
    """One line for what a cancel asked and what the scheduler answered.

    >>> cancel_text("T", "qdel", "Connection refused", 162)
    'cancel asked at T; qdel said: Connection refused (exit 162)'
    >>> cancel_text("T", "scancel", "", 0)
    'cancel asked at T; scancel accepted it (exit 0)'
    """
    if code == 0:
        return f"cancel asked at {asked_at}; {client} accepted it (exit 0)"
    tail = f" (exit {code})" if code is not None else ""
    return f"cancel asked at {asked_at}; {client} said: {said or '(nothing)'}{tail}"


def cancel_said(manifest: dict) -> str | None:
    """The manifest's line on a cancel the kit asked for; None when it asked for none.

    >>> cancel_said({"cancel": {"asked_at": "T", "command": "qdel 7.h"}})
    'cancel asked at T (qdel 7.h); no answer recorded'
    """
    cancel = manifest.get("cancel")
    if not isinstance(cancel, dict):
        return None
    return cancel.get("text") or (
        f"cancel asked at {cancel.get('asked_at')} ({cancel.get('command')}); no answer recorded"
    )


def cancel_accepted(run_dir: Path) -> bool:
    """Whether the kit asked the scheduler to cancel this run and the scheduler accepted it
    (the manifest's ``cancel``); a cancel refused, unanswered or still being asked is not."""
    import json

    try:
        manifest = json.loads((Path(run_dir) / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    cancel = manifest.get("cancel") if isinstance(manifest, dict) else None
    return isinstance(cancel, dict) and cancel.get("accepted") is True


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


def choose_backend(system: System, backend: str = "auto", nodes: int = 1) -> str:
    """The backend for a job of ``nodes`` nodes on ``system``: explicit, else by where we are.

    ``auto`` resolves in this order: a system without a scheduler runs locally; inside an
    allocation of the system's scheduler (``qsub -I``, ``salloc``, or a batch job: the workshop's
    JupyterLab on a compute node) the job runs right there with the local backend, which uses
    the site launcher and the allocation's nodefile, never a second qsub/sbatch (Aurora's debug
    queue allows one job per user); an allocation smaller than ``nodes`` is a SubmitError.
    Otherwise the scheduler's backend, when its submit command is on PATH. An explicit
    ``backend`` is used as given.

    >>> from hpcprof_kit.systems import load_system
    >>> choose_backend(load_system("local")), choose_backend(load_system("aurora"), "pbs", nodes=2)
    ('local', 'pbs')
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
    if in_allocation(system.scheduler):
        check_allocation(system, nodes)
        return "local"
    if shutil.which(command):
        return system.scheduler
    raise SubmitError(
        f"backend {system.scheduler!r} was expected for system {system.name}, but {command} "
        f"is not on PATH; run on a login node of {system.name}, or pass backend='local' to run "
        "the script on this machine"
    )


# Per scheduler: the variables that say "this process runs inside a job", the job id first.
ALLOCATION_VARS: dict[str, tuple[str, ...]] = {
    "pbs": ("PBS_JOBID", "PBS_NODEFILE"),
    "slurm": ("SLURM_JOB_ID",),
}
SLURM_NODE_COUNT_VARS = ("SLURM_JOB_NUM_NODES", "SLURM_NNODES")


def in_allocation(scheduler: str, env: Mapping[str, str] | None = None) -> bool:
    """True inside a job of that scheduler (an interactive one included).

    >>> in_allocation("pbs", {"PBS_JOBID": "123.aurora-pbs"}), in_allocation("pbs", {})
    (True, False)
    """
    env = os.environ if env is None else env
    return any(env.get(var) for var in ALLOCATION_VARS.get(scheduler, ()))


def allocation_nodes(scheduler: str, env: Mapping[str, str] | None = None) -> int | None:
    """Nodes of the allocation this process runs in; None outside one.

    PBS: the distinct hosts of ``$PBS_NODEFILE``; Slurm: ``SLURM_JOB_NUM_NODES`` (or
    ``SLURM_NNODES``). When the allocation does not say, 1: the local backend then runs on
    this host only.

    >>> allocation_nodes("slurm", {"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "2"})
    2
    """
    env = os.environ if env is None else env
    if not in_allocation(scheduler, env):
        return None
    if scheduler == "pbs" and env.get("PBS_NODEFILE"):
        try:
            hosts = set(Path(env["PBS_NODEFILE"]).read_text().split())
        except OSError:
            hosts = set()
        return len(hosts) or 1
    for var in SLURM_NODE_COUNT_VARS if scheduler == "slurm" else ():
        value = env.get(var, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


def check_allocation(system: System, nodes: int, env: Mapping[str, str] | None = None) -> int:
    """The allocation's node count; SubmitError when it is smaller than ``nodes``."""
    have = allocation_nodes(system.scheduler, env)
    if have is None:
        raise SubmitError(
            f"backend 'local' runs {system.name}'s script here, but this process is not "
            f"inside a {system.scheduler} allocation (no nodefile); start an interactive job "
            f"first, or use system='local'"
        )
    if nodes > have:
        env = os.environ if env is None else env
        job = env.get(ALLOCATION_VARS[system.scheduler][0]) or "this job"
        command = SUBMIT_COMMANDS[system.scheduler]
        raise SubmitError(
            f"nodes {nodes} does not fit the {system.scheduler} allocation this process runs in "
            f"({job}: {have} node{'s' if have != 1 else ''}); jobs started inside an allocation "
            f"run right here rather than through a second {command}. Ask for nodes <= {have}, "
            f"or submit from a login node with backend='{system.scheduler}'"
        )
    return have
