"""A real Slurm on localhost for the scheduler tests: munged, slurmctld and slurmd with a
temporary SLURM_CONF (recipe: Debian's slurm-wlm 22.05). Skips only when the binaries are absent
or this is not root (fails instead under HPCPROF_REQUIRE_ALL=1). A test can stop the controller
and have it back (``with cluster.controller_down(): ...``), as a scheduler stalls on a login node.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from must_have import missing

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol")
SBIN = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")


def _which(name: str) -> str | None:
    path = os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(SBIN)
    return shutil.which(name, path=path)


@dataclass
class SlurmCluster:
    """What a test needs to talk to the cluster: the config path and the client environment."""

    conf: Path
    root: Path
    jobcomp: Path
    env: dict[str, str] = field(default_factory=dict)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, env=self.env, capture_output=True, text=True, check=check)

    def wait_state(self, job_id: str, state: str, timeout: float = 60.0) -> None:
        """Until Slurm itself (squeue) shows the job in ``state``: a gate on the scheduler for
        steps only it decides (a requeued job leaving COMPLETING), not a poll of the kit."""
        squeue = ("squeue", "-h", "-j", job_id, "-o", "%T")
        ok, shown = _until(lambda: self.run(*squeue, check=False).stdout.strip(),
                           lambda s: s == state, timeout, interval=0.2)  # fmt: skip
        if not ok:
            raise AssertionError(f"Slurm shows job {job_id} {shown or 'nowhere'}, not {state}")

    @contextlib.contextmanager
    def controller_down(self) -> Iterator[None]:
        """slurmctld stopped for the block (running jobs carry on under slurmd), then back."""
        pid = int((self.root / "slurmctld.pid").read_text())
        os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).wait(30)
        try:
            yield
        finally:
            subprocess.run([_which("slurmctld")], check=True, env=self.env, capture_output=True)
            _wait_controller(self)


# KillWait is Slurm's default (30 s), as on the sites: the grace a job's TERM trap gets.
CONF = """\
ClusterName=hpcproftest
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/jobcomp.txt
MinJobAge=300
FirstJobId={first_job_id}
KillWait=30
InactiveLimit=0
OverTimeLimit=0
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmdSpoolDir={root}/spool
StateSaveLocation={root}/state
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def _first_job_id() -> int:
    """Job ids of their own per pytest-xdist worker (gw0 from 1, gw1 from 100001, ...): were two
    clusters ever up at once, a test that finds its job's processes by SLURM_JOB_ID finds its own."""
    number = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    return 1 + 100_000 * int(number) if number.isdigit() else 1


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _until(read, done, timeout: float, interval: float = 0.3):
    """(reached, last answer): ask the scheduler until ``done(answer)`` or the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        answer = read()
        if done(answer) or time.monotonic() >= deadline:
            return done(answer), answer
        time.sleep(interval)


def _controller_log(cluster: SlurmCluster) -> str:
    return (cluster.root / "slurmctld.log").read_text(errors="replace")[-2000:]


def _wait_controller(cluster: SlurmCluster, timeout: float = 60.0) -> None:
    """Until slurmctld answers again after a restart."""
    ok, _ = _until(lambda: cluster.run("scontrol", "ping", check=False).stdout,
                   lambda out: "is UP" in out, timeout)  # fmt: skip
    if not ok:
        raise RuntimeError(f"slurmctld did not come back; its log:\n{_controller_log(cluster)}")


def _wait_idle(cluster: SlurmCluster, timeout: float = 30.0) -> None:
    ok, state = _until(lambda: cluster.run("sinfo", "-h", "-o", "%T", check=False).stdout.strip(),
                       lambda s: s == "idle", timeout)  # fmt: skip
    if not ok:
        raise RuntimeError(
            f"Slurm node never became idle (last state {state!r}); slurmctld log:\n"
            f"{_controller_log(cluster)}"
        )


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """Start munged + slurmctld + slurmd on localhost; yield a SlurmCluster; shut them down."""
    absent = [d for d in DAEMONS if _which(d) is None]
    if absent:
        missing(
            f"Slurm/munge binaries absent ({', '.join(absent)}): apt-get install slurm-wlm munge"
        )
    if os.geteuid() != 0:
        missing("the local Slurm fixture starts slurmd, which must run as root")
    root = tmp_path_factory.mktemp("slurm")
    for sub in ("spool", "state", "munge"):
        (root / sub).mkdir()
    munge_socket = root / "munge" / "munge.socket"
    conf = root / "slurm.conf"
    conf.write_text(
        CONF.format(
            root=root,
            munge_socket=munge_socket,
            cpus=os.cpu_count() or 1,
            ctld_port=_free_port(),
            slurmd_port=_free_port(),
            first_job_id=_first_job_id(),
        )
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    env["PATH"] = os.pathsep.join([env.get("PATH", ""), *SBIN])
    for var in [k for k in env if k.startswith(("SLURM_", "PBS_"))]:
        if var != "SLURM_CONF":
            env.pop(var)
    cluster = SlurmCluster(conf=conf, root=root, jobcomp=root / "jobcomp.txt", env=env)

    # munged as root with its own key, socket, pid and log under the temp dir.
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    (root / "munge").chmod(0o700)
    started: list[str] = []
    try:
        subprocess.run(
            [_which("munged"), "--force", f"--socket={munge_socket}", f"--key-file={key}",
             f"--pid-file={root / 'munge' / 'munged.pid'}", f"--log-file={root / 'munge' / 'munged.log'}",
             f"--seed-file={root / 'munge' / 'munged.seed'}"],
            check=True, env=env, capture_output=True, text=True,
        )  # fmt: skip
        started.append("munged")
        subprocess.run([_which("slurmctld")], check=True, env=env, capture_output=True)
        started.append("slurmctld")
        subprocess.run(
            [_which("slurmd"), "-N", "localhost"], check=True, env=env, capture_output=True
        )
        started.append("slurmd")
        _wait_idle(cluster)
        yield cluster
    finally:
        if "slurmctld" in started:
            cluster.run("scontrol", "shutdown", check=False)
            _wait_gone(root / "slurmctld.pid")
            _wait_gone(root / "slurmd.pid")
        if "munged" in started:
            subprocess.run(
                [_which("munged"), f"--socket={munge_socket}", "-s"], env=env, capture_output=True
            )


def _wait_gone(pidfile: Path, timeout: float = 10.0) -> None:
    """Wait for a daemon to exit (its pid file lists a process that is gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid = int(pidfile.read_text().strip())
            os.kill(pid, 0)
        except (FileNotFoundError, ValueError, ProcessLookupError):
            return
        time.sleep(0.2)


@pytest.fixture
def cluster_env(slurm_cluster, monkeypatch):
    """The test's process talks to the test cluster: its SLURM_CONF and its PATH."""
    for key, value in slurm_cluster.env.items():
        if key in ("SLURM_CONF", "PATH"):
            monkeypatch.setenv(key, value)
    return slurm_cluster
