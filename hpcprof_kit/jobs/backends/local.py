"""The local backend: runs ``bash job.sh`` detached in its run directory, like a scheduler would.

It writes a nodefile and a job id (``local-<pid>``), enforces the walltime with ``timeout``
(TIMEOUT), records the exit status in a file (so another process re-attaching sees the end) and
cancels by signalling every process of the job's session (CANCELLED). Inside an interactive
allocation the script runs with the system's own launcher and the allocation's nodefile.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from hpcprof_kit.jobs.backends import CANCEL_MARK, Status, check_allocation, job_environment
from hpcprof_kit.systems import System

EXIT_FILE = "exit_code"
TIMEOUT_EXIT = 124  # what coreutils' timeout returns when the walltime ran out
# $1 = walltime in seconds. The exit status is written atomically once the script ends.
_WRAPPER = """\
timeout --kill-after=5 "$1" bash job.sh
rc=$?
printf '%s\\n' "$rc" > .exit_code.part && mv .exit_code.part exit_code
"""


def _nodefile_hosts() -> list[str]:
    """Hosts of the allocation we are in, else this machine."""
    nodefile = os.environ.get("PBS_NODEFILE")
    if nodefile and Path(nodefile).is_file():
        return list(dict.fromkeys(Path(nodefile).read_text().split()))
    nodelist = os.environ.get("SLURM_JOB_NODELIST")
    if nodelist and shutil.which("scontrol"):
        out = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True
        )
        if out.returncode == 0 and out.stdout.split():
            return out.stdout.split()
    return [socket.gethostname()]


def _session_pids(sid: int) -> list[int]:
    """Processes in session ``sid`` (the job's wrapper started one with start_new_session)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    pids.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                continue
    return pids


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs and is not a zombie. A process that ends between the open and the
    read of its stat file makes the read fail with ESRCH (ProcessLookupError)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class LocalBackend:
    name = "local"
    poll_interval = 0.25  # reading two small files costs nothing

    def submit(self, run_dir: Path, system: System, walltime_s: int) -> str:
        if system.scheduler != "none":  # in an allocation that holds the spec's nodes
            spec_file = run_dir / "spec.json"
            nodes = json.loads(spec_file.read_text()).get("nodes", 1) if spec_file.is_file() else 1
            check_allocation(system, nodes)
        (run_dir / "nodefile").write_text("\n".join(_nodefile_hosts()) + "\n")
        with open(run_dir / "stdout", "ab") as out, open(run_dir / "stderr", "ab") as err:
            proc = subprocess.Popen(
                ["bash", "-c", _WRAPPER, "hpcprof-local-job", str(walltime_s)],
                cwd=run_dir,
                env=job_environment(run_dir),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # survives a kernel restart; cancel signals the session
            )
        return f"local-{proc.pid}"

    def poll(self, run_dir: Path, job_id: str) -> Status:
        pid = int(job_id.split("-", 1)[1])
        hosts = tuple((run_dir / "nodefile").read_text().split())
        exit_file = run_dir / EXIT_FILE
        if not exit_file.exists():
            _reap(pid)
            if _alive(pid):
                return Status("RUNNING", None, hosts)
            if not exit_file.exists():
                note = "the job's process ended without recording its exit status"
                return Status("FAILED", None, hosts, note)
        rc = int(exit_file.read_text().strip())
        if (run_dir / CANCEL_MARK).exists():
            return Status("CANCELLED", rc, hosts)
        if rc == TIMEOUT_EXIT:
            return Status("TIMEOUT", rc, hosts, "the walltime ran out")
        return Status("COMPLETED" if rc == 0 else "FAILED", rc, hosts)

    def cancel(self, run_dir: Path, job_id: str) -> None:
        pid = int(job_id.split("-", 1)[1])
        (run_dir / CANCEL_MARK).touch()
        # Everything in the job's session except the wrapper, which then records the status.
        for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 0.0)):
            victims = [p for p in _session_pids(pid) if p != pid]
            for victim in victims:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, sig)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(_alive(p) for p in victims):
                time.sleep(0.05)


def _reap(pid: int) -> None:
    """Collect the wrapper's exit if this process started it (else it lingers as a zombie)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
