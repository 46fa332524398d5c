"""A stand-in for a PBS Pro server's clients with ALCF's submit rules: ``qsub``, ``qstat``,
``qdel`` and ``pbs_rstat``, answering as the real ones do (their lines, layouts and exit codes).

``qsub`` checks the request (:mod:`hpcprof_kit.rehearsal.pbs_request`), writes the job into the
twin's table (:mod:`hpcprof_kit.rehearsal.pbs_jobs`) and starts it detached
(:mod:`hpcprof_kit.rehearsal.pbs_job_start`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from hpcprof_kit.rehearsal import pbs_site
from hpcprof_kit.rehearsal.pbs_jobs import (
    DELETED,
    FINISHED,
    jobs_dir,
    next_id,
    read_job,
    subjob_id,
    write_job,
)
from hpcprof_kit.rehearsal.pbs_request import (
    JobRequest,
    Refused,
    array_indices,
    check_request,
    parse_directives,
    parse_options,
    queue_limits,
    walltime_seconds,
)
from hpcprof_kit.rehearsal.twin import TAG, Twin

WRAP = 78  # qstat -f wraps a line longer than this onto tab-indented continuation lines
# A client's answer while the server is down, as a real OpenPBS 23.06 answered: qdel exited
# 162 (PBSE_NOCONNECTS 15010, as an exit status) with "Connection refused"; qsub the same.
# qstat's exit status was not recorded: the twin gives it the same code.
DOWN_EXIT = 162
DOWN_ERRNO = 15010


def server_down(twin: Twin, client: str) -> int:
    """``client``'s refusal while the twin's server is down (0 while it is up)."""
    if not twin.server_down:
        return 0
    server = f"{twin.config['system']}-pbs-twin"
    print(f"Connection refused\n{client}: cannot connect to server {server} "
          f"(errno={DOWN_ERRNO})", file=sys.stderr)  # fmt: skip
    twin.log(client, ok=False, message="Connection refused", exit=DOWN_EXIT)
    return DOWN_EXIT


# ---- the clients ---------------------------------------------------------------------------
def server_record(twin: Twin):
    """What the twin's server enforces: a generic server's own queues, else the record's."""
    return pbs_site.record_view(twin.server) if twin.server else twin.record()


def qsub(twin: Twin, args: list[str]) -> int:
    if server_down(twin, "qsub"):
        return DOWN_EXIT
    record = server_record(twin)
    req = JobRequest()
    try:
        rest = parse_options(args, JobRequest())  # the script path comes after the options
        if len(rest) != 1:
            raise Refused("qsub: exactly one job script is expected (stdin scripts not modelled)")
        script = Path(rest[0]).resolve()
        parse_directives(script.read_text(), req)
        parse_options(args, req)  # the command line wins over the directives
        if os.getuid() in twin.config.get("refused_uids", ()):  # as a real server refuses root
            raise Refused("qsub: Bad UID for job execution")
        check_request(twin, record, req)
    except Refused as exc:
        print(str(exc), file=sys.stderr)
        twin.log("qsub", ok=False, message=str(exc), args=args, exit=exc.code)
        return exc.code
    except OSError as exc:
        print(f"qsub: script file cannot be loaded - {exc}", file=sys.stderr)
        twin.log("qsub", ok=False, message=str(exc), args=args)
        return 1
    job_id = next_id(twin, bool(req.array))
    spool = jobs_dir(twin) / f"{job_id.split('.')[0].rstrip('[]')}.SC"
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
    if server_down(twin, "qstat"):
        return DOWN_EXIT
    record = server_record(twin)
    if twin.server and ("-Q" in args or "-Qf" in args):
        names = [a for a in args if not a.startswith("-")]
        unknown = [n for n in names if n not in twin.server["queues"]]
        if unknown:
            print(f"qstat: Unknown queue {unknown[0]}", file=sys.stderr)
            return 170
        print("\n".join(pbs_site.qstat_queues(twin.server, names)), end="")
        return 0
    if twin.server and ("-B" in args or "-Bf" in args):
        print(pbs_site.qstat_server(twin.server, twin.hosts[0]), end="")
        return 0
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
        job = read_job(twin, job_id)
        job = _as_shown(twin, job, history) if job else job
        job = job or _queued_subjob(twin, job_id, history)
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


def _parent_of(twin: Twin, job_id: str) -> tuple[dict | None, int]:
    m = re.match(r"^(\d+)\[(\d+)\]\.(.+)$", job_id)
    if not m:
        return None, -1
    parent = read_job(twin, f"{m.group(1)}[].{m.group(3)}")
    if parent is None or int(m.group(2)) not in parent.get("indices", []):
        return None, -1
    return parent, int(m.group(2))


def _as_shown(twin: Twin, job: dict, history: bool) -> dict | None:
    """A finished job as the server shows it: a subjob reads ``X`` while its array lives
    (``F`` once it has ended). Without job history such a subjob reads ``X``,
    ``Exit_status`` 1, "Subjob finished", whatever its end, and once the array (or a plain
    job) has ended the server has forgotten it (None)."""
    if job["job_state"] != "F":
        return job
    parent = read_job(twin, job["array_id"]) if job.get("array_id") else None
    if parent is None or parent["job_state"] == "F":
        return job if history else None
    if history:
        return {**job, "job_state": "X"}
    return {**job, "job_state": "X", "Exit_status": 1, "substate": 70,
            "comment": "Subjob finished"}  # fmt: skip


def _queued_subjob(twin: Twin, job_id: str, history: bool = True) -> dict | None:
    """A subjob that has not run: PBS shows the parent's values for it (while the array is
    queued, its comment: each subjob of an array no node can hold reads "Can Never Run").
    One deleted while queued reads ``X`` with no ``Exit_status`` while its array lives, and
    ``F``, ``Exit_status`` 0, substate 92 once the array has ended (it never ran); without
    job history it reads ``X``, ``Exit_status`` 1, then is forgotten."""
    parent, index = _parent_of(twin, job_id)
    if parent is None:
        return None
    sub = {k: v for k, v in parent.items()
           if k not in ("array", "remaining", "Exit_status", "substate", "exec_host")}  # fmt: skip
    sub.update(id=job_id, array_id=parent["id"], array_index=index, comment="Subjob finished")
    ended = parent["job_state"] == "F"
    if ended and not history:
        return None
    if index in parent.get("deleted_indices", []):
        if not history:
            sub.update(job_state="X", Exit_status=1, substate=70)
        elif ended:
            sub.update(job_state="F", Exit_status=0, substate=FINISHED)
        else:
            sub.update(job_state="X", substate=70)
    elif ended:  # the array was deleted before this subjob's turn
        sub.update(job_state="F", substate=DELETED)
    else:  # while no subjob has begun, the scheduler's word on the array ("Can Never Run")
        sub.update(job_state="Q", comment=parent.get("comment", "") if parent["job_state"] == "Q"
                   else "")  # fmt: skip
    return sub


def qdel(twin: Twin, args: list[str]) -> int:
    """Delete jobs as PBS does: a queued job ends at once (no exit status, substate 91), a
    running one gets SIGTERM and, after the grace period, SIGKILL (its runner does both), and
    ends with Exit_status 271 and "terminated by USER@HOST"; a finished one is refused. While
    the server is down nothing is deleted (exit 162, "Connection refused")."""
    if server_down(twin, "qdel"):
        return DOWN_EXIT
    for job_id in args:
        job = read_job(twin, job_id)
        if job is None and re.search(r"\[\d+\]", job_id):
            code = _delete_queued_subjob(twin, job_id)
            if code:
                return code
            continue
        if job is None:
            print(f"qdel: Unknown Job Id {job_id}", file=sys.stderr)
            return 153
        if job["job_state"] == "F" and job.get("array_id"):
            print(f"qdel: Request invalid for finished array subjob {job_id}", file=sys.stderr)
            return 55
        if job["job_state"] == "F":
            print(f"qdel: Job has finished {job_id}", file=sys.stderr)
            return 35
        job["deleted_by"] = f"{twin.config['user']}@login-twin"
        if job.get("array") and job.get("runner_pid"):  # stop the running subjob, run no other
            write_job(twin, job)
            _rewrite_finished_subjobs(twin, job)
            running = [read_job(twin, subjob_id(job_id, i)) for i in job.get("remaining", [])]
            for sub in (r for r in running if r and r["job_state"] == "R"):
                sub["deleted_by"] = job["deleted_by"]
                write_job(twin, sub)
            with contextlib.suppress(ProcessLookupError):
                os.kill(job["runner_pid"], signal.SIGTERM)
            twin.log("qdel", job_id=job_id)
            continue
        if job["job_state"] in ("Q", "H") and not job.get("runner_pid"):
            job.update(job_state="F", substate=DELETED, ended=time.time())
            if str(job.get("comment", "")).startswith(("Can Never Run", "Not Running")):
                # the scheduler's last word, as a real server ends it
                job["comment"] += " and terminated"
            write_job(twin, job)
        else:
            job.update(job_state="E")
            write_job(twin, job)
            if job.get("runner_pid"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(job["runner_pid"], signal.SIGTERM)
        twin.log("qdel", job_id=job_id)
    return 0


def qhold(twin: Twin, args: list[str]) -> int:
    """Hold queued jobs as ``qhold`` does: ``job_state`` H, comment "Job held by USER on
    DATE" (as a real OpenPBS 23.06 server wrote it); the job starts only after ``qrls``. A
    job that has begun is refused (the twin's choice: it models no checkpointing)."""
    if server_down(twin, "qhold"):
        return DOWN_EXIT
    for job_id in [a for a in args if not a.startswith("-")]:
        job = read_job(twin, job_id)
        if job is None:
            print(f"qhold: Unknown Job Id {job_id}", file=sys.stderr)
            return 153
        if job["job_state"] not in ("Q", "H") or job.get("runner_pid"):
            print(f"qhold: Request invalid for state of job {job_id}", file=sys.stderr)
            return 168
        when = time.strftime("%a %b %d %H:%M:%S %Y")
        job.update(job_state="H", comment=f"Job held by {twin.config['user']} on {when}")
        write_job(twin, job)
        twin.log("qhold", job_id=job_id)
    return 0


def qrls(twin: Twin, args: list[str]) -> int:
    """Release held jobs (``qrls``): back to ``Q``, the hold's comment gone; the twin's
    scheduler then starts them."""
    if server_down(twin, "qrls"):
        return DOWN_EXIT
    for job_id in [a for a in args if not a.startswith("-")]:
        job = read_job(twin, job_id)
        if job is None:
            print(f"qrls: Unknown Job Id {job_id}", file=sys.stderr)
            return 153
        if job["job_state"] == "H":
            job.update(job_state="Q", comment="")
            write_job(twin, job)
        twin.log("qrls", job_id=job_id)
    return 0


def _delete_queued_subjob(twin: Twin, job_id: str) -> int:
    """``qdel 'N[i]'`` of a subjob that has not started: its array never runs it."""
    parent, index = _parent_of(twin, job_id)
    if parent is None:
        print(f"qdel: Invalid request {job_id}", file=sys.stderr)
        return 156
    if index not in parent.get("remaining", []) or parent["job_state"] == "F":
        print(f"qdel: Request invalid for finished array subjob {job_id}", file=sys.stderr)
        return 55
    parent["remaining"] = [i for i in parent["remaining"] if i != index]
    parent["deleted_indices"] = [*parent.get("deleted_indices", []), index]
    write_job(twin, parent)
    twin.log("qdel", job_id=job_id, queued=True)
    return 0


def _rewrite_finished_subjobs(twin: Twin, parent: dict) -> None:
    """What OpenPBS 23.06 does to an array's finished subjobs on ``qdel 'N[]'``: each is
    rewritten to ``Exit_status`` 1, substate 91, "Subjob finished", whatever its end."""
    for index in parent.get("indices", []):
        sub = read_job(twin, subjob_id(parent["id"], index))
        if sub is not None and sub["job_state"] == "F":
            sub.update(Exit_status=1, substate=DELETED, comment="Subjob finished")
            write_job(twin, sub)


def pbs_rstat(twin: Twin, args: list[str]) -> int:
    names = [a for a in args if not a.startswith("-")] or list(twin.config["reservations"])
    for name in names:
        r = twin.config["reservations"].get(name)
        if r is None:
            print(f"pbs_rstat: Unknown reservation ID {name}", file=sys.stderr)
            return 1
        secs = walltime_seconds(r.get("walltime", "01:00:00"))
        print(f"Resv ID: {name}.{twin.config['system']}-pbs-twin\nReserve_Name = {name}\n"
              f"reserve_state = RESV_RUNNING\nreserve_duration = {secs}\nqueue = {name}\n"
              f"Resource_List.nodect = {r.get('nodes', 1)}\nResource_List.walltime = "
              f"{r.get('walltime', '01:00:00')}\n")  # fmt: skip
    return 0


def pbsnodes(twin: Twin, args: list[str]) -> int:
    if not twin.server:
        print(f"pbsnodes: {TAG} modelled for a generic server only", file=sys.stderr)
        return 1
    print(pbs_site.pbsnodes(twin.server, twin.hosts), end="")
    return 0


def qmgr(twin: Twin, args: list[str]) -> int:
    if not twin.server or args[:2] != ["-c", "p s"]:
        print(f"qmgr: {TAG} only qmgr -c 'p s' of a generic server is modelled", file=sys.stderr)
        return 1
    print(pbs_site.qmgr_print_server(twin.server), end="")
    return 0
