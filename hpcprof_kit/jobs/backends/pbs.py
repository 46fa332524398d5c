"""The PBS backend: ``qsub``; state from ``qstat -x -F json -f ID`` (PBS Pro) or ``qstat -f ID``
(Torque-style clients); ``qdel``. ``job_state`` and ``Exit_status`` give the kit's state.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from hpcprof_kit.jobs.backends import CANCEL_MARK, Status, job_environment, run_command
from hpcprof_kit.systems import System

# PBS job_state letters -> the kit's states (F: finished in PBS Pro, C: completed in Torque).
PBS_STATES = {
    "Q": "QUEUED", "H": "QUEUED", "W": "QUEUED", "T": "QUEUED", "S": "QUEUED", "M": "QUEUED",
    "R": "RUNNING", "E": "RUNNING", "B": "RUNNING", "X": "FINISHED", "F": "FINISHED",
    "C": "FINISHED",
}  # fmt: skip
WALLTIME_EXIT = -29  # PBS Pro's JOB_EXEC_KILL_WALLTIME
_LINE = re.compile(r"^\s*([\w.]+) = (.*)$", re.MULTILINE)
NO_EXIT_STATUS = "the PBS server reported no exit status"


def job_end_exit_code(run_dir: Path) -> int | None:
    """The exit code the job script recorded itself (``job_end.json``), if it did."""
    try:
        return int(json.loads((run_dir / "job_end.json").read_text())["exit_code"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _quiet(args: list[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None


def _attributes(job_id: str) -> dict[str, str]:
    """The job's attributes: PBS Pro's JSON (history included) when offered, else ``qstat -f``."""
    done = _quiet(["qstat", "-x", "-F", "json", "-f", job_id])
    if done is not None and done.returncode == 0 and done.stdout.lstrip().startswith("{"):
        jobs = json.loads(done.stdout).get("Jobs", {})
        for attrs in jobs.values():
            return {k: str(v) for k, v in attrs.items() if not isinstance(v, dict)}
    done = _quiet(["qstat", "-f", job_id])
    if done is None or done.returncode != 0:
        return {}
    return dict(_LINE.findall(done.stdout))


def state_from_attributes(attrs: dict[str, str], cancelled: bool) -> Status:
    """The kit's state from PBS attributes (``job_state``, ``Exit_status``/``exit_status``)."""
    letter = attrs.get("job_state", "")
    hosts = tuple(sorted({h.split("/")[0] for h in attrs.get("exec_host", "").split("+") if h}))
    mapped = PBS_STATES.get(letter)
    if mapped in ("QUEUED", "RUNNING"):
        return Status(mapped, None, hosts)
    raw = attrs.get("Exit_status", attrs.get("exit_status"))
    code = int(raw) if raw is not None and raw.lstrip("-").isdigit() else None
    if cancelled:
        return Status("CANCELLED", code, hosts)
    if code == WALLTIME_EXIT:
        return Status("TIMEOUT", code, hosts, "the walltime ran out")
    if code is None:
        # Torque-style wrappers report the end but not the exit status.
        return Status("COMPLETED", None, hosts, NO_EXIT_STATUS)
    return Status("COMPLETED" if code == 0 else "FAILED", code, hosts)


class PbsBackend:
    name = "pbs"
    poll_interval = 1.0

    def submit(self, run_dir: Path, system: System, walltime_s: int) -> str:
        done = run_command(
            ["qsub", "-o", str(run_dir / "stdout"), "-e", str(run_dir / "stderr"), "job.sh"],
            "submit to PBS",
            cwd=run_dir,  # becomes PBS_O_WORKDIR, the script's run directory
            env=job_environment(run_dir),
        )
        return done.stdout.strip()

    def poll(self, run_dir: Path, job_id: str) -> Status:
        attrs = _attributes(job_id)
        cancelled = (run_dir / CANCEL_MARK).exists()
        if not attrs:
            if cancelled:
                return Status("CANCELLED", None, (), "cancelled; the server has forgotten the job")
            return Status("FAILED", None, (), f"qstat no longer knows job {job_id}")
        status = state_from_attributes(attrs, cancelled)
        if status.note == NO_EXIT_STATUS:  # the script's own record answers instead
            recorded = job_end_exit_code(run_dir)
            if recorded is not None:
                state = "COMPLETED" if recorded == 0 else "FAILED"
                return Status(state, recorded, status.hosts, "exit code from job_end.json")
        return status

    def cancel(self, run_dir: Path, job_id: str) -> None:
        (run_dir / CANCEL_MARK).touch()
        run_command(["qdel", job_id], f"cancel PBS job {job_id}")
