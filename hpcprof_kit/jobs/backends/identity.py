"""Which process is a local job: recorded when it starts, proven before the kit signals it.

A pid alone proves nothing: after a reboot, a container restart or a long uptime the same
number names another process. The local backend records the job's pid, the process's start
time (psutil) and its run directory in the manifest; a process is the job only while all three
match. Processes the job started are proven by descent from it, or, once it is gone, by
carrying the job's ``HPCPROF_RUN_DIR`` in their environment inside the job's session.

>>> import os
>>> me = ProcessIdentity.of(os.getpid(), os.getcwd())
>>> me.prove()[0] is not None
True
>>> "now belongs to another process" in ProcessIdentity(me.pid, me.start_time - 3600, me.run_dir).prove()[1]
True
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

# Start times are computed from the boot time, which the kernel may report a little
# differently from one read to the next; a reused pid starts seconds or days apart.
START_TOLERANCE_S = 1.0
RUN_DIR_VAR = "HPCPROF_RUN_DIR"
WRAPPER_NAME = "hpcprof-local-job"  # $0 of the local backend's wrapper


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")


def _same_dir(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


@dataclass(frozen=True)
class ProcessIdentity:
    """What proves a process is the job: pid, start time (seconds since the epoch), run dir."""

    pid: int
    start_time: float | None
    run_dir: str

    @classmethod
    def of(cls, pid: int, run_dir: str | os.PathLike[str]) -> ProcessIdentity:
        """The identity of the live process ``pid`` (just started for ``run_dir``)."""
        return cls(pid, psutil.Process(pid).create_time(), str(run_dir))

    @classmethod
    def from_manifest(cls, data: dict[str, Any], job_id: str, run_dir: Path) -> ProcessIdentity:
        """From the manifest's ``process``; runs from before it was recorded have only the
        pid in their job id, and no start time to prove anything with."""
        rec = data.get("process") or {}
        pid = int(rec.get("pid") or job_id.rsplit("-", 1)[1])
        start = rec.get("start_time")
        return cls(
            pid, float(start) if start is not None else None, rec.get("run_dir") or str(run_dir)
        )

    def to_manifest(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        started = f", started {_when(self.start_time)}" if self.start_time else ""
        return f"pid {self.pid}{started}"

    def prove(self) -> tuple[psutil.Process | None, str]:
        """The job's process (a zombie included) when this pid is still the job; else None
        and why not, in words for the manifest's note."""
        try:
            proc = psutil.Process(self.pid)
            started = proc.create_time()
        except psutil.NoSuchProcess:
            return None, f"its process ({self.describe()}) is gone"
        if self.start_time is None:  # a run from before start times were recorded
            if _is_wrapper(proc) and _cwd_is(proc, self.run_dir):
                return proc, ""
            return None, (
                f"pid {self.pid} cannot be proven to be the job (this run recorded no start time, "
                f"and pid {self.pid} now runs {_name(proc)}, started {_when(started)})"
            )
        if abs(started - self.start_time) > START_TOLERANCE_S:
            return None, (
                f"its process ({self.describe()}) is gone; pid {self.pid} now belongs to another "
                f"process ({_name(proc)}, started {_when(started)})"
            )
        try:
            cwd = proc.cwd()
        except (psutil.ZombieProcess, psutil.AccessDenied, psutil.NoSuchProcess):
            cwd = None  # a zombie has no working directory; its start time has proven it
        if cwd is not None and not _same_dir(cwd, self.run_dir):
            return None, f"pid {self.pid} runs in {cwd}, not in the job's run directory"
        return proc, ""

    def processes(self, leader: psutil.Process | None) -> list[psutil.Process]:
        """The job's processes other than its leader: its descendants while the leader is
        proven, else the members of its session that carry the job's run directory."""
        found: dict[int, psutil.Process] = {}
        if leader is not None:
            try:
                found = {p.pid: p for p in leader.children(recursive=True)}
            except psutil.NoSuchProcess:
                leader = None
        for proc in psutil.process_iter():
            if proc.pid in found or proc.pid == self.pid:
                continue
            try:
                if os.getsid(proc.pid) != self.pid:
                    continue
                # A session outlives its leader: without the leader, only the job's own
                # environment proves a member belongs to this job.
                if leader is None:
                    run_dir = proc.environ().get(RUN_DIR_VAR)
                    if not run_dir or not _same_dir(run_dir, self.run_dir):
                        continue
                found[proc.pid] = proc
            except (OSError, psutil.Error):
                continue
        return list(found.values())


def _is_wrapper(proc: psutil.Process) -> bool:
    """The local backend's wrapper names itself in its argv (``bash -c ... hpcprof-local-job``)."""
    try:
        return WRAPPER_NAME in proc.cmdline()
    except psutil.Error:
        return False


def _cwd_is(proc: psutil.Process, run_dir: str) -> bool:
    try:
        return _same_dir(proc.cwd(), run_dir)
    except psutil.Error:
        return False


def _name(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline()[:3]) or proc.name()
    except psutil.Error:
        return "an unreadable process"


def is_zombie(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
