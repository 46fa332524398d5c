"""What a PBS Pro ``qsub`` (with ALCF's submit rules) accepts, for the site rehearsal's twin.

``qsub`` reads the ``#PBS`` directives (until the first command line, as PBS does), then its own
command line on top, and refuses what ALCF's PBS refuses with PBS's own messages and exit codes
(as a real OpenPBS 23.06 server gave them): no ``-A``, no ``filesystems``, an unknown queue, a
walltime or node count outside the queue's limits, a bad ``select``, a second job where the
queue allows one per user.

>>> req = parse_directives("#!/bin/bash -l\\n#PBS -A P\\n#PBS -l select=2:system=polaris\\necho")
>>> req.account, req.nodes, req.select_resources
('P', 2, {'system': 'polaris'})
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from hpcprof_kit.rehearsal.pbs_jobs import jobs_in
from hpcprof_kit.rehearsal.twin import TAG, Twin
from hpcprof_kit.systems import System

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
    "Queue is not enabled": 173,
    "per-user limit": 38,
    "Bad UID for job execution": 175,
}


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
    hpcprof_kit.rehearsal.pbs_request.Refused: qsub: illegal -J value
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


def parse_options(words: list[str], req: JobRequest) -> list[str]:
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
            parse_options(shlex.split(stripped[4:], comments=False), req)
        elif stripped and not stripped.startswith("#"):
            break  # PBS reads no directive after the first command
    return req


def walltime_seconds(text: str) -> int:
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
                "max_walltime": r.get("walltime", "01:00:00"), "per_user": 0,
                "max_array_size": MAX_ARRAY_SIZE, "kind": "resv"}  # fmt: skip
    if queue not in record.queues:
        raise Refused("qsub: Unknown queue")
    q = record.queues[queue]
    rules = record.extra.get("queue_rules", {})
    per_user = rules.get(queue, {}).get("max_jobs_per_user", 0)
    # an array may be no longer than the queue's max_array_size, nor the server's
    arrays = min(int(rules.get(queue, {}).get("max_array_size", MAX_ARRAY_SIZE)),
                 int(rules.get("max_array_size", MAX_ARRAY_SIZE)))  # fmt: skip
    return {"min_nodes": q.min_nodes, "max_nodes": q.max_nodes, "max_walltime": q.max_walltime,
            "per_user": int(per_user), "max_array_size": arrays, "kind": "exec"}  # fmt: skip


def check_request(twin: Twin, record: System, req: JobRequest) -> None:
    """Refused with PBS's (and ALCF's submit filter's) message where the site would refuse."""
    if record.account_required and not req.account:
        raise Refused("qsub: Account_Name is required to be set.")
    if req.filesystems and "filesystems" not in getattr(record, "resources", ("filesystems",)):
        # a generic server, as the third real one (cases.md row 56), exited 187 here; the
        # first real server 166
        raise Refused("qsub: Unknown resource Resource_List.filesystems",
                      187 if twin.server else None)  # fmt: skip
    if record.default_filesystems and not req.filesystems:
        raise Refused("qsub: Resource: filesystems is required to be set.")
    if not req.walltime:
        raise Refused(f"qsub: Resource: walltime is required to be set. {TAG}")
    queue = req.queue or record.default_queue
    limits = queue_limits(twin, record, queue)
    if twin.server and twin.server["queues"].get(queue, {}).get("enabled", True) is False:
        raise Refused("qsub: Queue is not enabled")
    nodes = req.nodes or 1
    secs, most = walltime_seconds(req.walltime), walltime_seconds(limits["max_walltime"])
    shortest = walltime_seconds(
        str(record.extra.get("queue_rules", {}).get("min_walltime", "0:0:0"))
    )
    too_short = limits["kind"] == "exec" and secs < shortest
    if not limits["min_nodes"] <= nodes <= limits["max_nodes"] or secs > most or too_short:
        raise Refused("qsub: Job violates queue and/or server resource limits")
    suffix = str(record.extra.get("pbs_select_suffix", ""))
    for key, value in (p.split("=", 1) for p in suffix.split(":") if "=" in p):
        if req.select_resources.get(key) != value:
            raise Refused("qsub: Job violates queue and/or server resource limits")
    # an array is N jobs
    count = len(array_indices(req.array, limits["max_array_size"])[0]) if req.array else 1
    if limits["per_user"] and jobs_in(twin, queue) + count > limits["per_user"]:
        raise Refused("qsub: would exceed queue generic's per-user limit")
