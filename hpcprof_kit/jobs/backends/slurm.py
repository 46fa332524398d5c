"""The Slurm backend: ``sbatch --parsable``; state from ``squeue``, then ``scontrol show job``,
then the completion records (``sacct -c``, or the jobcomp/filetxt file named by JobCompLoc);
``scancel``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from hpcprof_kit.jobs.backends import CANCEL_MARK, Status, job_environment, run_command
from hpcprof_kit.systems import System

# Slurm's job states -> the kit's six.
SLURM_STATES = {
    "PENDING": "QUEUED", "CONFIGURING": "QUEUED", "REQUEUED": "QUEUED", "SUSPENDED": "QUEUED",
    "RUNNING": "RUNNING", "COMPLETING": "RUNNING", "STAGE_OUT": "RUNNING",
    "COMPLETED": "COMPLETED", "CANCELLED": "CANCELLED", "TIMEOUT": "TIMEOUT",
    "FAILED": "FAILED", "NODE_FAIL": "FAILED", "OUT_OF_MEMORY": "FAILED", "BOOT_FAIL": "FAILED",
    "DEADLINE": "TIMEOUT", "PREEMPTED": "CANCELLED",
}  # fmt: skip
_FIELD = re.compile(r"(\w+)=(\S*)")


def _quiet(args: list[str]) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def _exit_code(text: str) -> int | None:
    # "ExitCode=3:0" -> 3 (the second number is the signal)
    code, _, _sig = text.partition(":")
    return int(code) if code.isdigit() else None


def _status(fields: dict[str, str]) -> Status:
    raw = fields.get("JobState", "").split()[0] if fields.get("JobState") else ""
    state = SLURM_STATES.get(raw, "FAILED")
    hosts = tuple(h for h in fields.get("NodeList", "").split(",") if h and h != "(null)")
    return Status(state, _exit_code(fields.get("ExitCode", "")), hosts)


class SlurmBackend:
    name = "slurm"
    poll_interval = 1.0

    def submit(self, run_dir: Path, system: System, walltime_s: int) -> str:
        done = run_command(
            ["sbatch", "--parsable", "job.sh"],
            "submit to Slurm",
            cwd=run_dir,
            env=job_environment(run_dir),
        )
        return done.stdout.strip().split(";")[0]

    def poll(self, run_dir: Path, job_id: str) -> Status:
        live = _quiet(["squeue", "-h", "-j", job_id, "-o", "%T %N"]).split()
        if live and live[0] in SLURM_STATES and SLURM_STATES[live[0]] in ("QUEUED", "RUNNING"):
            return Status(SLURM_STATES[live[0]], None, tuple(live[1:2]))
        shown = _quiet(["scontrol", "show", "job", job_id, "-o"])
        if shown:
            return _status(dict(_FIELD.findall(shown)))
        record = self._completion_record(job_id)
        if record:
            return _status(record)
        if (run_dir / CANCEL_MARK).exists():
            return Status("CANCELLED", None, (), "cancelled; Slurm has forgotten the job")
        return Status("FAILED", None, (), f"Slurm no longer knows job {job_id}")

    def _completion_record(self, job_id: str) -> dict[str, str]:
        out = _quiet(["sacct", "-c", "-j", job_id, "-n", "-P", "-o", "State,ExitCode,NodeList"])
        for line in out.splitlines():
            state, code, nodes = (line.split("|") + ["", "", ""])[:3]
            if state:
                return {"JobState": state, "ExitCode": code, "NodeList": nodes}
        # No sacct: read the jobcomp/filetxt file itself.
        config = dict(_FIELD.findall(_quiet(["scontrol", "show", "config"]).replace(" = ", "=")))
        location = config.get("JobCompLoc", "")
        if location.startswith("/") and Path(location).is_file():
            for line in reversed(Path(location).read_text().splitlines()):
                fields = dict(_FIELD.findall(line))
                if fields.get("JobId") == job_id:
                    return fields
        return {}

    def cancel(self, run_dir: Path, job_id: str) -> None:
        (run_dir / CANCEL_MARK).touch()
        run_command(["scancel", job_id], f"cancel Slurm job {job_id}")
