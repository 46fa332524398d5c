"""A stand-in for a PBS Pro server with ALCF's submit rules: ``qsub``, ``qstat``, ``qdel``,
``pbs_rstat``, and the start of a batch job as PBS Pro starts it.

``qsub`` reads the ``#PBS`` directives (until the first command line, as PBS does), refuses what
ALCF's PBS refuses with PBS's own messages (no ``-A``, no ``filesystems``, an unknown queue, a
walltime or node count outside the queue's limits, a bad ``select``, a second job where the queue
allows one per user), then starts the job detached. The job starts as PBS Pro starts it: the
user's login shell (argv[0] ``-bash``) in ``$HOME``, reading the path of the spooled script on
its stdin (so the script's ``#!`` line counts), with only the variables PBS sets (``PBS_O_*``,
``PBS_JOBID``, ``PBS_NODEFILE``, ``PBS_ENVIRONMENT=PBS_BATCH``, ``HOME``, a default ``PATH``).

>>> req = parse_directives("#!/bin/bash -l\\n#PBS -A P\\n#PBS -l select=2:system=polaris\\necho")
>>> req.account, req.nodes, req.select_resources
('P', 2, {'system': 'polaris'})
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpcprof_kit.rehearsal.twin import DEFAULT_PATH, Twin
from hpcprof_kit.systems import System, load_system

TAG = "[site twin]"
WALLTIME_EXIT = -29  # PBS Pro's JOB_EXEC_KILL_WALLTIME
_SELECT = re.compile(r"^(\d+)((?::[A-Za-z_]+=[A-Za-z0-9_.-]+)*)$")
_WALLTIME = re.compile(r"^(?:(\d+):)?(\d+):(\d+)$")


class Refused(Exception):
    """qsub refuses the job (the message is PBS's own line, the exit code PBS's)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code if code is not None else _exit_code(message)


# qsub's exit status per refusal, as the real OpenPBS 23.06 server gave them
QSUB_EXITS = {
    "Unknown queue": 170,
    "Job violates queue and/or server resource limits": 188,
    "Unknown resource": 166,
    "Illegal attribute or resource value": 187,
    "per-user limit": 38,
}
KILL_GRACE_S = 10.0  # PBS sends SIGTERM, then SIGKILL this long after (kill_delay)
SIGNAL_BASE = 256  # Exit_status of a job killed by signal N: 256 + N
DELETED = 91  # substate of a deleted job
FINISHED, FAILED_SUBSTATE = 92, 93
WRAP = 78  # qstat -f wraps a line longer than this onto tab-indented continuation lines


def _exit_code(message: str) -> int:
    return next((code for words, code in QSUB_EXITS.items() if words in message), 1)


@dataclass
class JobRequest:
    """What ``qsub`` was asked for: directives, then the command line on top."""

    name: str = ""
    account: str = ""
    queue: str = ""
    select: str = ""
    nodes: int = 0
    select_resources: dict[str, str] = field(default_factory=dict)
    place: str = ""
    walltime: str = ""
    filesystems: str = ""
    keep: str = ""
    out: str = ""
    err: str = ""
    forward_all: bool = False
    forward: str = ""
    array: str = ""

    def apply(self, option: str, value: str) -> None:
        if option == "-l":
            for item in value.split(","):
                key, _, val = item.partition("=")
                self._resource(key.strip(), val.strip())
        elif option in _SIMPLE:
            setattr(self, _SIMPLE[option], value)
        elif option == "-V":
            self.forward_all = True

    def _resource(self, key: str, value: str) -> None:
        if key == "select":
            self.select = value
            m = _SELECT.match(value)
            if not m or int(m.group(1)) < 1:
                raise Refused("qsub: Illegal attribute or resource value Resource_List.select")
            self.nodes = int(m.group(1))
            pairs = [p for p in m.group(2).split(":") if p]
            self.select_resources = dict(p.split("=", 1) for p in pairs)
        elif key in ("walltime", "place", "filesystems"):
            setattr(self, key, value)
        else:
            raise Refused(f"qsub: Unknown resource Resource_List.{key}")


_SIMPLE = {"-N": "name", "-A": "account", "-q": "queue", "-k": "keep", "-o": "out", "-e": "err",
           "-v": "forward", "-J": "array"}  # fmt: skip
_TAKES_VALUE = {"-N", "-A", "-q", "-k", "-o", "-e", "-v", "-l", "-j", "-W", "-S", "-m", "-M", "-J"}
MAX_ARRAY_SIZE = 10000  # PBS Pro's default max_array_size
_ARRAY = re.compile(r"^(\d+)-(\d+)(?::(\d+))?(?:%(\d+))?$")


def array_indices(value: str, limit: int = MAX_ARRAY_SIZE) -> tuple[list[int], int]:
    """The indices of ``-J a-b[:step][%max]`` and the most subjobs that may run at once (0:
    no limit), refused as PBS refuses them.

    >>> array_indices("0-6:2%1")
    ([0, 2, 4, 6], 1)
    >>> array_indices("3")
    Traceback (most recent call last):
    ...
    hpcprof_kit.rehearsal.pbs.Refused: qsub: illegal -J value
    """
    m = _ARRAY.match(value)
    if not m:
        raise Refused("qsub: illegal -J value", 2)
    first, last, step = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
    if first >= last or step < 1:
        raise Refused("qsub: illegal -J value", 2)
    indices = list(range(first, last + 1, step))
    if len(indices) > limit:
        raise Refused("qsub: Array job exceeds server or queue size limit", 3)
    return indices, int(m.group(4) or 0)


def _parse_options(words: list[str], req: JobRequest) -> list[str]:
    """Apply qsub options to ``req``; returns the words left (the script path)."""
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("-") or word == "-":
            break
        if word == "-I":
            raise Refused(f"qsub: {TAG} interactive jobs are modelled by 'rehearse --interactive'")
        if word in _TAKES_VALUE:
            if i + 1 >= len(words):
                raise Refused(f"qsub: option requires an argument -- '{word[1:]}'")
            req.apply(word, words[i + 1])
            i += 2
        elif word == "-V":
            req.apply(word, "")
            i += 1
        else:
            raise Refused(f"qsub: invalid option -- '{word.lstrip('-')}'")
    return words[i:]


def parse_directives(text: str, req: JobRequest | None = None) -> JobRequest:
    """The ``#PBS`` lines before the first command of the script (a ``#!`` line is skipped)."""
    req = req or JobRequest()
    for n, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if n == 0 and stripped.startswith("#!"):
            continue
        if stripped.startswith("#PBS"):
            _parse_options(shlex.split(stripped[4:], comments=False), req)
        elif stripped and not stripped.startswith("#"):
            break  # PBS reads no directive after the first command
    return req


def _seconds(text: str) -> int:
    m = _WALLTIME.match(text)
    if not m:
        raise Refused("qsub: Illegal attribute or resource value Resource_List.walltime")
    h, mi, s = (int(g or 0) for g in m.groups())
    return h * 3600 + mi * 60 + s


def queue_limits(twin: Twin, record: System, queue: str) -> dict:
    """Nodes, walltime and per-user job limits of ``queue`` (a reservation's from the twin)."""
    if queue in twin.config["reservations"]:
        r = twin.config["reservations"][queue]
        return {"min_nodes": 1, "max_nodes": int(r.get("nodes", 1)),
                "max_walltime": r.get("walltime", "01:00:00"), "per_user": 0, "kind": "resv"}  # fmt: skip
    if queue not in record.queues:
        raise Refused("qsub: Unknown queue")
    q = record.queues[queue]
    per_user = record.extra.get("queue_rules", {}).get(queue, {}).get("max_jobs_per_user", 0)
    return {"min_nodes": q.min_nodes, "max_nodes": q.max_nodes, "max_walltime": q.max_walltime,
            "per_user": int(per_user), "kind": "exec"}  # fmt: skip


def check_request(twin: Twin, record: System, req: JobRequest) -> None:
    """Refused with PBS's (and ALCF's submit filter's) message where the site would refuse."""
    if record.account_required and not req.account:
        raise Refused("qsub: Account_Name is required to be set.")
    if record.default_filesystems and not req.filesystems:
        raise Refused("qsub: Resource: filesystems is required to be set.")
    if not req.walltime:
        raise Refused(f"qsub: Resource: walltime is required to be set. {TAG}")
    queue = req.queue or record.default_queue
    limits = queue_limits(twin, record, queue)
    nodes = req.nodes or 1
    secs, most = _seconds(req.walltime), _seconds(limits["max_walltime"])
    shortest = _seconds(str(record.extra.get("queue_rules", {}).get("min_walltime", "0:0:0")))
    too_short = limits["kind"] == "exec" and secs < shortest
    if not limits["min_nodes"] <= nodes <= limits["max_nodes"] or secs > most or too_short:
        raise Refused("qsub: Job violates queue and/or server resource limits")
    suffix = str(record.extra.get("pbs_select_suffix", ""))
    for key, value in (p.split("=", 1) for p in suffix.split(":") if "=" in p):
        if req.select_resources.get(key) != value:
            raise Refused("qsub: Job violates queue and/or server resource limits")
    count = len(array_indices(req.array)[0]) if req.array else 1  # an array is N jobs
    if limits["per_user"] and _jobs_in(twin, queue) + count > limits["per_user"]:
        raise Refused("qsub: would exceed queue generic's per-user limit")


# ---- the twin's job table ------------------------------------------------------------------
def _jobs_dir(twin: Twin) -> Path:
    return twin.root / "pbs" / "jobs"


def _job_path(twin: Twin, job_id: str) -> Path:
    return _jobs_dir(twin) / f"{job_id.split('.')[0]}.json"


def read_job(twin: Twin, job_id: str) -> dict | None:
    path = _job_path(twin, job_id)
    return json.loads(path.read_text()) if path.exists() else None


def write_job(twin: Twin, job: dict) -> None:
    path = _job_path(twin, job["id"])
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(job, indent=1))
    os.replace(tmp, path)


def _jobs_in(twin: Twin, queue: str) -> int:
    live = [json.loads(p.read_text()) for p in _jobs_dir(twin).glob("*.json")]
    live = [j for j in live if not j.get("array_id")]  # a subjob counts through its array
    count = sum(
        len(j.get("remaining", [])) if j.get("array") else 1
        for j in live
        if j["queue"] == queue and j["job_state"] in ("Q", "R", "B")
    )
    interactive = twin.config.get("interactive")
    return count + (1 if interactive and interactive["queue"] == queue else 0)


def _next_id(twin: Twin, array: bool = False) -> str:
    counter = twin.root / "pbs" / "next_id"
    seq = int(counter.read_text()) if counter.exists() else 4100
    counter.write_text(str(seq + 1))
    return f"{seq}{'[]' if array else ''}.{twin.config['system']}-pbs-twin"


# ---- the clients ---------------------------------------------------------------------------
def qsub(twin: Twin, args: list[str]) -> int:
    record = load_system(twin.config["system"])
    req = JobRequest()
    try:
        rest = _parse_options(args, JobRequest())  # the script path comes after the options
        if len(rest) != 1:
            raise Refused("qsub: exactly one job script is expected (stdin scripts not modelled)")
        script = Path(rest[0]).resolve()
        parse_directives(script.read_text(), req)
        _parse_options(args, req)  # the command line wins over the directives
        check_request(twin, record, req)
    except Refused as exc:
        print(str(exc), file=sys.stderr)
        twin.log("qsub", ok=False, message=str(exc), args=args, exit=exc.code)
        return exc.code
    except OSError as exc:
        print(f"qsub: script file cannot be loaded - {exc}", file=sys.stderr)
        twin.log("qsub", ok=False, message=str(exc), args=args)
        return 1
    job_id = _next_id(twin, bool(req.array))
    spool = _jobs_dir(twin) / f"{job_id.split('.')[0].rstrip('[]')}.SC"
    spool.write_text(script.read_text())
    spool.chmod(0o700)
    workdir = os.getcwd()
    seq = job_id.split(".")[0].rstrip("[]")
    name = req.name or script.name
    job = {
        "id": job_id, "name": name, "queue": req.queue or record.default_queue,
        "job_state": "Q", "account": req.account, "nodes": req.nodes or 1,
        "walltime": req.walltime, "keep": req.keep, "script": str(spool),
        "out": req.out or os.path.join(workdir, f"{name}.o{seq}"),
        "err": req.err or os.path.join(workdir, f"{name}.e{seq}"),
        "workdir": workdir, "submit_path": os.environ.get("PATH", ""),
        "forward": dict(os.environ) if req.forward_all else _forwarded(req.forward),
        "filesystems": req.filesystems,
    }  # fmt: skip
    if req.array:
        indices, most = array_indices(req.array)
        job.update(array=True, indices=indices, remaining=indices, max_run_subjobs=most,
                   array_indices_submitted=req.array.split("%")[0])  # fmt: skip
        if not req.out:
            job["out"] += ".^array_index^"
        if not req.err:
            job["err"] += ".^array_index^"
    write_job(twin, job)
    twin.log("qsub", ok=True, job_id=job_id, queue=job["queue"], nodes=job["nodes"],
             walltime=req.walltime, account=req.account, filesystems=req.filesystems,
             keep=req.keep)  # fmt: skip
    subprocess.Popen(
        twin.standin_argv("pbs-run") + [job_id],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    print(job_id)
    return 0


def _forwarded(spec: str) -> dict[str, str]:
    out = {}
    for item in filter(None, spec.split(",")):
        key, eq, value = item.partition("=")
        if eq:
            out[key] = value
        elif key in os.environ:
            out[key] = os.environ[key]
    return out


def _attributes(job: dict) -> dict:
    attrs = {"Job_Name": job["name"], "job_state": job["job_state"], "queue": job["queue"],
             "Account_Name": job["account"], "Resource_List.walltime": job["walltime"]}  # fmt: skip
    if job.get("substate") is not None:
        attrs["substate"] = job["substate"]
    if job.get("array"):
        attrs["array"] = "True"
        attrs["array_indices_submitted"] = job["array_indices_submitted"]
        left = job.get("remaining", [])
        attrs["array_indices_remaining"] = _ranges(left) if left else "-"
    if job.get("array_id"):
        attrs["array_id"], attrs["array_index"] = job["array_id"], job["array_index"]
    if job.get("exec_host"):
        attrs["exec_host"] = job["exec_host"]
    if job.get("Exit_status") is not None:
        attrs["Exit_status"] = job["Exit_status"]
    if job.get("comment"):
        attrs["comment"] = job["comment"]
    return attrs


def qstat(twin: Twin, args: list[str]) -> int:
    record = load_system(twin.config["system"])
    if "-Q" in args or "-Qf" in args:
        names = [a for a in args if not a.startswith("-")] or list(record.queues)
        for name in names:
            try:
                limits = queue_limits(twin, record, name)
            except Refused:
                print(f"qstat: Unknown queue {name}", file=sys.stderr)
                return 170
            print(f"Queue: {name}\n    queue_type = Execution\n"
                  f"    resources_max.walltime = {limits['max_walltime']}\n"
                  f"    resources_min.nodect = {limits['min_nodes']}\n"
                  f"    resources_max.nodect = {limits['max_nodes']}\n"
                  "    enabled = True\n    started = True\n")  # fmt: skip
        return 0
    ids = [a for a in args if not a.startswith("-") and a not in ("json",)]
    history = twin.config.get("job_history", True)
    if "-x" in args and not history:
        head = {"timestamp": int(time.time()), "pbs_version": "twin", "pbs_server": "twin"}
        print(json.dumps(head) if "json" in args else "")
        print("qstat: PBS is not configured to maintain job history", file=sys.stderr)
        return 0
    jobs = []
    for job_id in ids:
        job = read_job(twin, job_id) or _queued_subjob(twin, job_id)
        if job is None or (job["job_state"] == "F" and not history):
            print(f"qstat: Unknown Job Id {job_id}", file=sys.stderr)
            return 153
        if job["job_state"] == "F" and "-x" not in args:
            print(f"qstat: {job_id} Job has finished, use -x or -H to obtain historical job "
                  "information", file=sys.stderr)  # fmt: skip
            return 35
        jobs.append(job)
    if "json" in args:
        print(json.dumps({"Jobs": {j["id"]: _attributes(j) for j in jobs}}))
    else:
        for j in jobs:
            print(f"Job Id: {j['id']}")
            for key, value in _attributes(j).items():
                print(_wrapped(f"    {key} = {value}"))
    return 0


def _wrapped(line: str) -> str:
    """A ``qstat -f`` line as PBS prints it: past ``WRAP`` characters the value goes on in
    continuation lines that start with a tab.

    >>> lines = _wrapped("    comment = " + "x" * 70).split("\\n")
    >>> [len(line) for line in lines], lines[1][0] == "\\t"
    ([78, 7], True)
    """
    if len(line) <= WRAP:
        return line
    out, rest = [line[:WRAP]], line[WRAP:]
    while rest:
        out.append("\t" + rest[: WRAP - 1])
        rest = rest[WRAP - 1 :]
    return "\n".join(out)


def _ranges(indices: list[int]) -> str:
    """``[0, 1, 2, 5]`` as PBS writes it: ``0-2,5``."""
    out, start = [], None
    for i, n in enumerate(indices):
        if start is None:
            start = n
        if i + 1 == len(indices) or indices[i + 1] != n + 1:
            out.append(f"{start}-{n}" if n != start else str(n))
            start = None
    return ",".join(out)


def _subjob_id(parent_id: str, index: int) -> str:
    seq, _, server = parent_id.partition(".")
    return f"{seq.rstrip('[]')}[{index}].{server}"


def _queued_subjob(twin: Twin, job_id: str) -> dict | None:
    """A subjob that has not started: PBS shows the parent's values for it."""
    m = re.match(r"^(\d+)\[(\d+)\]\.(.+)$", job_id)
    if not m:
        return None
    parent = read_job(twin, f"{m.group(1)}[].{m.group(3)}")
    if parent is None or int(m.group(2)) not in parent.get("indices", []):
        return None
    sub = {k: v for k, v in parent.items() if k not in ("array", "remaining", "Exit_status")}
    sub.update(id=job_id, array_id=parent["id"], array_index=int(m.group(2)))
    if parent["job_state"] in ("F", "X"):
        sub.update(job_state="X", comment="Subjob finished")
    else:
        sub["job_state"] = "Q"
    return sub


def qdel(twin: Twin, args: list[str]) -> int:
    """Delete jobs as PBS does: a queued job ends at once (no exit status, substate 91), a
    running one gets SIGTERM and, after the grace period, SIGKILL (its runner does both), and
    ends with Exit_status 271 and "terminated by USER@HOST"; a finished one is refused."""
    for job_id in args:
        job = read_job(twin, job_id)
        if job is None:
            print(f"qdel: Unknown Job Id {job_id}", file=sys.stderr)
            return 153
        if job["job_state"] == "F":
            print(f"qdel: Job has finished {job_id}", file=sys.stderr)
            return 35
        job["deleted_by"] = f"{twin.config['user']}@login-twin"
        if job.get("array") and job.get("runner_pid"):  # stop the running subjob, run no other
            write_job(twin, job)
            running = [read_job(twin, _subjob_id(job_id, i)) for i in job.get("remaining", [])]
            for sub in (r for r in running if r and r["job_state"] == "R"):
                sub["deleted_by"] = job["deleted_by"]
                write_job(twin, sub)
            with contextlib.suppress(ProcessLookupError):
                os.kill(job["runner_pid"], signal.SIGTERM)
            twin.log("qdel", job_id=job_id)
            continue
        if job["job_state"] == "Q" and not job.get("runner_pid"):
            job.update(job_state="F", substate=DELETED, ended=time.time())
            write_job(twin, job)
        else:
            job.update(job_state="E")
            write_job(twin, job)
            if job.get("runner_pid"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(job["runner_pid"], signal.SIGTERM)
        twin.log("qdel", job_id=job_id)
    return 0


def pbs_rstat(twin: Twin, args: list[str]) -> int:
    names = [a for a in args if not a.startswith("-")] or list(twin.config["reservations"])
    for name in names:
        r = twin.config["reservations"].get(name)
        if r is None:
            print(f"pbs_rstat: Unknown reservation ID {name}", file=sys.stderr)
            return 1
        secs = _seconds(r.get("walltime", "01:00:00"))
        print(f"Resv ID: {name}.{twin.config['system']}-pbs-twin\nReserve_Name = {name}\n"
              f"reserve_state = RESV_RUNNING\nreserve_duration = {secs}\nqueue = {name}\n"
              f"Resource_List.nodect = {r.get('nodes', 1)}\nResource_List.walltime = "
              f"{r.get('walltime', '01:00:00')}\n")  # fmt: skip
    return 0


# ---- the job's start -----------------------------------------------------------------------
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


def run_job(twin: Twin, args: list[str]) -> int:
    """The execution side of one job: login shell, walltime, exit status (runs detached).

    As a real PBS MoM: the job runs with umask 0077; at the walltime, and on a qdel, the job
    gets SIGTERM (its EXIT trap writes its record), then SIGKILL after the grace period
    (``kill_grace_s`` in the twin's config, PBS's ``kill_delay``: 10 s); the job is in state
    E meanwhile. The walltime kill writes PBS's line to the job's stderr and ends with
    Exit_status -29; a qdel ends with 271 (256 + SIGTERM) and "terminated by USER@HOST".
    """
    job = read_job(twin, args[0])
    assert job is not None
    if job["job_state"] == "F":  # deleted while queued, before the runner started
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
        sub = {k: v for k, v in parent.items() if k not in ("array", "remaining", "indices")}
        sub.update(id=_subjob_id(parent["id"], index), array_id=parent["id"],
                   array_index=index, job_state="Q", comment="")  # fmt: skip
        for stream in ("out", "err"):
            sub[stream] = parent[stream].replace("^array_index^", str(index))
        write_job(twin, sub)
        code = _run_single(twin, sub)
        parent = read_job(twin, parent["id"]) or parent
        parent["remaining"] = [i for i in parent["remaining"] if i != index]
        parent["Exit_status"] = 1 if code > 0 else 2 if code < 0 else 0
        write_job(twin, parent)
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
    limit = _seconds(job["walltime"])
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
                    _set_state(twin, job["id"], "E")
                    _kill_after_grace(shell, grace)
                    code = SIGNAL_BASE + signal.SIGTERM
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    _set_state(twin, job["id"], "E")
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
    write_job(twin, job)
    twin.log("job_end", job_id=job["id"], exit_code=code)
    return code


def _set_state(twin: Twin, job_id: str, letter: str) -> None:
    job = read_job(twin, job_id)
    if job is not None:
        job["job_state"] = letter
        write_job(twin, job)
