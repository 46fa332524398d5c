"""The start of a batch job as PBS Pro starts it, for the site rehearsal's twin.

The job starts as PBS Pro starts it: the user's login shell (argv[0] ``-bash``) in ``$HOME``,
reading the path of the spooled script on its stdin (so the script's ``#!`` line counts), with
only the variables PBS sets (``PBS_O_*``, ``PBS_JOBID``, ``PBS_NODEFILE``,
``PBS_ENVIRONMENT=PBS_BATCH``, ``HOME``, a default ``PATH``); its walltime and a ``qdel`` end it
as a MoM does.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from hpcprof_kit.rehearsal.pbs_jobs import (
    DELETED,
    FAILED_SUBSTATE,
    FINISHED,
    read_job,
    set_state,
    subjob_id,
    write_job,
)
from hpcprof_kit.rehearsal.pbs_request import walltime_seconds
from hpcprof_kit.rehearsal.twin import DEFAULT_PATH, Twin

WALLTIME_EXIT = -29  # PBS Pro's JOB_EXEC_KILL_WALLTIME
KILL_GRACE_S = 10.0  # PBS sends SIGTERM, then SIGKILL this long after (kill_delay)
SIGNAL_BASE = 256  # Exit_status of a job killed by signal N: 256 + N


def batch_environment(twin: Twin, job: dict, nodefile: Path, tmpdir: Path) -> dict[str, str]:
    """Only what PBS Pro gives a batch job (plus what ``-V``/``-v`` forwarded)."""
    user, home = twin.config["user"], str(twin.home)
    env = dict(job["forward"])
    env.update({
        "HOME": home, "LOGNAME": user, "USER": user, "SHELL": "/bin/bash", "PATH": DEFAULT_PATH,
        "PBS_JOBNAME": job["name"], "PBS_JOBID": job["id"], "PBS_QUEUE": job["queue"],
        "PBS_NODEFILE": str(nodefile), "PBS_ENVIRONMENT": "PBS_BATCH", "ENVIRONMENT": "BATCH",
        "PBS_O_HOME": home, "PBS_O_WORKDIR": job["workdir"], "PBS_O_PATH": job["submit_path"],
        "PBS_O_SHELL": "/bin/bash", "PBS_O_LOGNAME": user, "PBS_O_HOST": "login-twin",
        "PBS_O_QUEUE": job["queue"], "PBS_O_SYSTEM": "Linux", "TMPDIR": str(tmpdir),
        "NCPUS": "1", "OMP_NUM_THREADS": "1", "PBS_JOBDIR": home, "PBS_NODENUM": "0",
        "PBS_TASKNUM": "1", "PBS_MOMPORT": "15003",
        "PBS_JOBCOOKIE": f"{abs(hash(job['id'])):032X}"[:32],
    })  # fmt: skip
    if job["account"]:
        env["PBS_ACCOUNT"] = job["account"]
    if job.get("array_id"):
        env["PBS_ARRAY_INDEX"] = str(job["array_index"])
        env["PBS_ARRAY_ID"] = job["array_id"]
    return env


def _kill_after_grace(shell: subprocess.Popen, grace: float) -> None:
    """SIGTERM to the job's processes now, SIGKILL once ``grace`` seconds have passed."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(shell.pid, signal.SIGTERM)
    try:
        shell.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()


def _comment(job: dict, hosts: list[str], how: str) -> str:
    started = time.strftime("%a %b %d at %H:%M", time.localtime(job.get("started", time.time())))
    return f"Job run at {started} on ({hosts[0]}:ncpus=1) and {how}"


# A generic server's scheduler on a job asking more nodes than it has: it stays queued with
# this comment for good (as a real OpenPBS 23.06 server left a select=2 job on one node).
NEVER_RUNS = "Can Never Run: Not enough total nodes available"


# ... and on a job that must wait for the node another job holds (``exclusive_nodes``).
NOT_RUNNING = "Not Running: Not enough free nodes available"


def wait_to_start(twin: Twin, job_id: str, interval: float = 0.1) -> dict | None:
    """The job once the twin's scheduler may start it: not while it is held (``qhold``,
    ``H``), while scheduling is off, or ever when a generic server has fewer nodes than it
    asks for (it stays ``Q``, "Can Never Run: ..."); on a generic server whose jobs take the
    node whole (``exclusive_nodes``), not while another job runs there ("Not Running: Not
    enough free nodes available"). None when it has left the table."""
    while True:
        job = read_job(twin, job_id)
        if job is None or job["job_state"] == "F":
            return job
        if twin.server and job["nodes"] > len(twin.hosts) and job["job_state"] == "Q":
            _say(twin, job, NEVER_RUNS)
        elif (
            job["job_state"] != "H"
            and Twin.open(twin.root).scheduling
            and (not (twin.server or {}).get("exclusive_nodes") or _claim_node(twin, job_id))
        ):
            return read_job(twin, job_id)
        time.sleep(interval)


def _say(twin: Twin, job: dict, comment: str) -> None:
    if job.get("comment") != comment:
        job["comment"] = comment
        write_job(twin, job)


def _claim_node(twin: Twin, job_id: str) -> bool:
    """Start ``job_id`` on the node if no other job holds it (one at a time: a lock)."""
    import fcntl

    with open(twin.root / "pbs" / "node.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        job = read_job(twin, job_id)
        if job is None or job["job_state"] != "Q":
            return False
        others = [json.loads(p.read_text()) for p in (twin.root / "pbs" / "jobs").glob("*.json")]
        busy = any(o["id"] != job_id and not o.get("array_id") and (
            o["job_state"] in ("R", "E", "B") or (o.get("claimed") and o["job_state"] == "Q"))
            for o in others)  # fmt: skip
        if busy:
            _say(twin, job, NOT_RUNNING)
            return False
        job.update(claimed=True, comment="")  # its runner starts it now
        write_job(twin, job)
        return True


def run_job(twin: Twin, args: list[str]) -> int:
    """The execution side of one job: login shell, walltime, exit status (runs detached).

    As a real PBS MoM: the job runs with umask 0077; at the walltime, and on a qdel, the job
    gets SIGTERM (its EXIT trap writes its record), then SIGKILL after the grace period
    (``kill_grace_s`` in the twin's config, PBS's ``kill_delay``: 10 s); the job is in state
    E meanwhile. The walltime kill writes PBS's line to the job's stderr and ends with
    Exit_status -29; a qdel ends with 271 (256 + SIGTERM) and "terminated by USER@HOST".
    With ``stage_delay_s`` in the twin's config, the job first reads ended with the comment
    from its start and its output not yet staged, for that long (a real OpenPBS 23.06 server
    showed a failed job's stderr and final comment about 3 s after qstat showed it ended).
    """
    job = wait_to_start(twin, args[0])
    if job is None or job["job_state"] == "F":  # deleted while queued, before it started
        return 0
    if job.get("array"):
        return _run_array(twin, job)
    _run_single(twin, job)
    return 0


def _run_array(twin: Twin, parent: dict) -> int:
    """The subjobs of an array, one after another (the twin's node takes one at a time):
    each with its own id ``N[i]``, ``PBS_ARRAY_INDEX`` and output files; the parent is B
    while they run and takes, as PBS does, the Exit_status of the last subjob to end (1 if
    it exited above 0, 2 if below, else 0). A qdel of the array stops what runs and starts
    no other subjob."""
    parent.update(job_state="B", substate=70, runner_pid=os.getpid(), started=time.time())
    parent["comment"] = time.strftime("Job Array Began at %a %b %d at %H:%M")
    write_job(twin, parent)
    for index in list(parent["indices"]):
        parent = read_job(twin, parent["id"]) or parent
        if parent.get("deleted_by"):
            break
        if index in parent.get("deleted_indices", []):
            continue  # deleted while queued: it never runs
        sub = {k: v for k, v in parent.items() if k not in ("array", "remaining", "indices")}
        sub.update(id=subjob_id(parent["id"], index), array_id=parent["id"],
                   array_index=index, job_state="Q", comment="")  # fmt: skip
        for stream in ("out", "err"):
            sub[stream] = parent[stream].replace("^array_index^", str(index))
        write_job(twin, sub)
        code = _run_single(twin, sub)
        parent = read_job(twin, parent["id"]) or parent
        parent["remaining"] = [i for i in parent["remaining"] if i != index]
        parent["Exit_status"] = 1 if code > 0 else 2 if code < 0 else 0
        write_job(twin, parent)
    if parent.get("deleted_by"):
        parent["Exit_status"] = 1  # a deleted array ends at 1, "... and terminated"
    failed = parent.get("Exit_status", 0) != 0
    how = (
        f"terminated by {parent['deleted_by']}"
        if parent.get("deleted_by")
        else ("failed" if failed else "finished")
    )
    parent.update(job_state="F", remaining=[], ended=time.time(),
                  comment=f"{parent['comment']} and {how}")  # fmt: skip
    write_job(twin, parent)
    return 0


def _run_single(twin: Twin, job: dict) -> int:
    """One job (or subjob) on the twin's nodes; returns its Exit_status."""
    hosts = twin.hosts[: job["nodes"]] or twin.hosts[:1]
    if len(hosts) < job["nodes"]:  # the twin has as many nodes as the rehearsal asked for
        hosts = [f"{twin.config['system']}-node{i}" for i in range(job["nodes"])]
    seq = job["id"].split(".")[0]
    nodefile = twin.root / "pbs" / f"{seq}.nodes"
    nodefile.write_text("".join(f"{h}\n" for h in hosts))
    tmpdir = twin.root / "tmp" / f"pbs.{job['id']}"
    tmpdir.mkdir(parents=True, exist_ok=True)
    job.update(job_state="R", substate=42, runner_pid=os.getpid(),
               exec_host="+".join(f"{h}/0" for h in hosts), started=time.time())  # fmt: skip
    job["comment"] = _comment(job, hosts, "")[: -len(" and ")]
    write_job(twin, job)
    direct = "d" in job["keep"]  # -k doe: written straight to the final paths
    out_path = Path(job["out"]) if direct else twin.root / "pbs" / f"{seq}.OU"
    err_path = Path(job["err"]) if direct else twin.root / "pbs" / f"{seq}.ER"
    env = batch_environment(twin, job, nodefile, tmpdir)
    twin.log("job_start", job_id=job["id"], env=sorted(env), login_shell=True,
             shebang=Path(job["script"]).read_text().split("\n", 1)[0])  # fmt: skip
    grace = float(twin.config.get("kill_grace_s", KILL_GRACE_S))
    limit = walltime_seconds(job["walltime"])
    deleted = []
    old_umask = os.umask(0o077)  # what the job and its files get, as under a real MoM
    try:
        with open(out_path, "ab") as out, open(err_path, "ab") as err:
            shell = subprocess.Popen(
                ["-bash"], executable="/bin/bash", cwd=twin.home, env=env,
                stdin=subprocess.PIPE, stdout=out, stderr=err, start_new_session=True,
            )  # fmt: skip
            signal.signal(signal.SIGTERM, lambda *_: deleted.append(True))
            assert shell.stdin is not None
            shell.stdin.write(f"{job['script']}\n".encode())  # PBS hands the script's path
            shell.stdin.close()
            code = None
            deadline = time.monotonic() + limit
            while code is None:
                if deleted:
                    set_state(twin, job["id"], "E")
                    _kill_after_grace(shell, grace)
                    code = SIGNAL_BASE + signal.SIGTERM
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    set_state(twin, job["id"], "E")
                    over = int(limit + grace)
                    err.write(
                        f"=>> PBS: job killed: walltime {over} exceeded limit {limit}\n".encode()
                    )
                    err.flush()
                    _kill_after_grace(shell, grace)
                    code = WALLTIME_EXIT
                    break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    code = shell.wait(timeout=min(left, 0.2))
    finally:
        os.umask(old_umask)
    delay = float(twin.config.get("stage_delay_s", 0.0))
    if delay and not direct:  # ended, as qstat first shows it: its start's comment, no files
        ended = read_job(twin, job["id"]) or job
        ended.update(job_state="F", Exit_status=code, ended=time.time())
        write_job(twin, ended)
        time.sleep(delay)
    if not direct:
        for spooled, final in ((out_path, job["out"]), (err_path, job["err"])):
            Path(final).write_bytes(spooled.read_bytes())
    job = read_job(twin, job["id"]) or job
    if code == SIGNAL_BASE + signal.SIGTERM:
        how, sub = f"terminated by {job.get('deleted_by', 'unknown')}", DELETED
    elif code == WALLTIME_EXIT:
        how, sub = "exceeded resource walltime", FAILED_SUBSTATE
    else:
        how, sub = ("finished", FINISHED) if code == 0 else ("failed", FAILED_SUBSTATE)
    job.update(job_state="F", Exit_status=code, substate=sub, ended=time.time(),
               comment=_comment(job, hosts, how))  # fmt: skip
    if Twin.open(twin.root).server_down:  # the server learns the end at its restart, and a
        del job["comment"]  # real one then showed no comment for it
    write_job(twin, job)
    twin.log("job_end", job_id=job["id"], exit_code=code)
    return code
