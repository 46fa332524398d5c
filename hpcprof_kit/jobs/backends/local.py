"""The local backend: runs ``bash job.sh`` detached in its run directory, like a scheduler would.

It writes a nodefile and a job id (``local-<pid>``), records what proves the job's process is
the job (pid, start time, run directory: :mod:`identity`), enforces the walltime with
``timeout`` (TIMEOUT), records the exit status in a file (so another process re-attaching sees
the end) and cancels by signalling the job's own processes (CANCELLED). A job whose process is
gone without an exit record is LOST; a pid that now names another process is never signalled
nor waited on. Inside an interactive allocation the script runs with the system's own
launcher and the allocation's nodefile.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import psutil

from hpcprof_kit.errors import SubmitError
from hpcprof_kit.jobs.backends import CANCEL_MARK, Status, check_allocation, job_environment
from hpcprof_kit.jobs.backends.identity import WRAPPER_NAME, ProcessIdentity, is_zombie
from hpcprof_kit.jobs.backends.outcome import JOB_END, from_exit_code, from_record, read_job_end
from hpcprof_kit.systems import System

EXIT_FILE = "exit_code"
TIMEOUT_EXIT = 124  # what coreutils' timeout returns when the walltime ran out
CANCEL_GRACE_S = 5.0  # between SIGTERM and SIGKILL
# $1 = walltime in seconds. The exit status is written atomically once the script ends;
# timeout says 137 instead of 124 when the job outlived the walltime and needed SIGKILL.
_WRAPPER = """\
timeout --kill-after=5 "$1" bash job.sh
rc=$?
if [ "$rc" -eq 137 ] && [ "$SECONDS" -ge "$1" ]; then rc=124; fi
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


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def threads_per_rank(run_dir: Path, env: dict[str, str]) -> dict:
    """How many OpenMP threads each rank of a local job gets, and who decided.

    Ranks sharing a laptop's cores each start torch with one thread per core by default, and the
    oversubscribed cores turn every timing into noise. Unless you set ``OMP_NUM_THREADS``
    yourself (in your environment or the spec's ``env``), each rank gets usable cores / ranks,
    at least 1. The answer is recorded in the run's manifest.

    >>> import tempfile, json, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "spec.json").write_text(json.dumps({"ranks_per_node": 2, "env": {}}))
    >>> threads_per_rank(d, {"OMP_NUM_THREADS": "3"})
    {'value': 3, 'from': 'your environment'}
    >>> threads_per_rank(d, {})["from"]
    'cores / ranks'
    """
    spec_file = run_dir / "spec.json"
    spec = json.loads(spec_file.read_text()) if spec_file.is_file() else {}
    own = (spec.get("env") or {}).get("OMP_NUM_THREADS")
    if own is not None:
        return {"value": _as_int(own), "from": "the spec's env"}
    if env.get("OMP_NUM_THREADS"):
        return {"value": _as_int(env["OMP_NUM_THREADS"]), "from": "your environment"}
    ranks = max(int(spec.get("ranks_per_node") or 1), 1)
    return {"value": max(usable_cores() // ranks, 1), "from": "cores / ranks"}


def _as_int(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text  # recorded as given (e.g. "4,2" for nested levels)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs and is not a zombie. A process that ends between the open and the
    read of its stat file makes the read fail with ESRCH (ProcessLookupError)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wrapper_exit(run_dir: Path) -> int | None:
    try:
        return int((run_dir / EXIT_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def _identity(run_dir: Path, job_id: str) -> ProcessIdentity:
    from hpcprof_kit.jobs.rundir import RunDir

    return ProcessIdentity.from_manifest(RunDir(run_dir).manifest(), job_id, run_dir)


class LocalBackend:
    name = "local"
    poll_interval = 0.25  # reading a few small files costs nothing

    def submit(self, run_dir: Path, system: System, walltime_s: int) -> str:
        from hpcprof_kit.jobs.rundir import RunDir

        if system.scheduler != "none":  # in an allocation that holds the spec's nodes
            spec_file = run_dir / "spec.json"
            nodes = json.loads(spec_file.read_text()).get("nodes", 1) if spec_file.is_file() else 1
            check_allocation(system, nodes)
        (run_dir / "nodefile").write_text("\n".join(_nodefile_hosts()) + "\n")
        env = job_environment(run_dir)
        threads = threads_per_rank(run_dir, env)
        if threads["from"] == "cores / ranks":
            env["OMP_NUM_THREADS"] = str(threads["value"])
        RunDir(run_dir).update(omp_num_threads=threads)
        with open(run_dir / "stdout", "ab") as out, open(run_dir / "stderr", "ab") as err:
            proc = subprocess.Popen(
                ["bash", "-c", _WRAPPER, WRAPPER_NAME, str(walltime_s)],
                cwd=run_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # survives a kernel restart; cancel signals the session
            )
        # Not yet reaped, so the process is there to be measured even if it already ended.
        RunDir(run_dir).update(process=ProcessIdentity.of(proc.pid, run_dir).to_manifest())
        return f"local-{proc.pid}"

    def poll(self, run_dir: Path, job_id: str) -> Status:
        hosts = tuple((run_dir / "nodefile").read_text().split())
        rc = _wrapper_exit(run_dir)
        if rc is None:
            identity = _identity(run_dir, job_id)
            proc, why = identity.prove()
            if proc is not None and not is_zombie(proc):
                return Status("RUNNING", None, hosts)
            if proc is not None:  # proven, ended, not yet collected: collect it if ours
                _reap(proc.pid)
                why = f"its process ({identity.describe()}) is gone"
            rc = _wrapper_exit(run_dir)  # it may have ended between the two reads
            if rc is None:
                return self._without_wrapper(run_dir, identity, why, hosts)
        if (run_dir / CANCEL_MARK).exists():
            return Status("CANCELLED", rc, hosts)
        if rc == TIMEOUT_EXIT:
            return Status("TIMEOUT", rc, hosts, "the walltime ran out")
        return from_exit_code(rc, hosts)

    def _without_wrapper(
        self, run_dir: Path, identity: ProcessIdentity, why: str, hosts: tuple[str, ...]
    ) -> Status:
        """The job's wrapper is gone without recording the exit: the script's own record, the
        job's processes still running, or LOST."""
        cancelled = (run_dir / CANCEL_MARK).exists()
        record = read_job_end(run_dir)
        if record is not None:
            return from_record(record, hosts, cancelled)
        left = identity.processes(None)
        if left:
            return Status(
                "RUNNING", None, hosts, f"{why}; {len(left)} of the job's processes run on"
            )
        if cancelled:
            return Status("CANCELLED", None, hosts, f"cancelled; {why}")
        return Status(
            "LOST", None, hosts, f"{why} and left no exit record ({EXIT_FILE}, {JOB_END})"
        )

    def cancel(self, run_dir: Path, job_id: str) -> None:
        if _wrapper_exit(run_dir) is not None:
            return  # it has ended: nothing of it is left to signal
        identity = _identity(run_dir, job_id)
        leader, why = identity.prove()
        if leader is not None and is_zombie(leader):
            leader, why = None, f"its process ({identity.describe()}) is gone"
        victims = identity.processes(leader)
        if leader is None and not victims:
            raise SubmitError(
                f"cannot cancel {job_id} ({run_dir.name}): {why}; the kit signals only processes "
                "it can prove belong to the job, so nothing was signalled"
            )
        (run_dir / CANCEL_MARK).touch()
        # The job's processes but not its wrapper, which then records the exit status.
        for sig, grace in ((signal.SIGTERM, CANCEL_GRACE_S), (signal.SIGKILL, 0.0)):
            for victim in victims:
                with contextlib.suppress(psutil.NoSuchProcess):
                    victim.send_signal(sig)  # psutil refuses a pid that now names another
            if grace:
                _, victims = psutil.wait_procs(victims, timeout=grace)


def _reap(pid: int) -> None:
    """Collect the wrapper's exit if this process started it (else it lingers as a zombie)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
