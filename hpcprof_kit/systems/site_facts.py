"""What a cluster says about itself, read from its scheduler's own commands (pure parsers).

PBS Pro / OpenPBS: ``qstat -Qf`` (queues and their limits), ``pbsnodes -av`` (nodes, cores,
GPUs), ``qmgr -c 'p s'`` or ``qstat -Bf`` (server rules: default queue, job history, array
size, custom resources). Slurm: ``scontrol show partition``, ``sinfo`` and
``scontrol show config``. Each parser takes the command's text and returns plain facts;
``hpcprof_kit.systems.site_init`` turns them into a site record.

>>> queues = parse_pbs_queues('''Queue: debug
...     queue_type = Execution
...     max_queued = [u:PBS_GENERIC=1]
...     resources_max.nodect = 2
...     resources_max.walltime = 01:00:00
...     enabled = True
... ''')
>>> queues[0].name, queues[0].max_nodes, queues[0].max_walltime, queues[0].max_queued_per_user
('debug', 2, '01:00:00', 1)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hpcprof_kit.jobs.queues import parse_attributes, walltime_text

# max_queued / max_run entries: [u:PBS_GENERIC=1] limits every user; [o:PBS_ALL=10] everyone.
_GENERIC_USER = re.compile(r"\[u:PBS_GENERIC=(\d+)\]")
# qmgr's "print server": "set server NAME = VALUE", "create resource NAME".
_QMGR_SET = re.compile(r"^set server (\S+) = (.*)$")
_QMGR_RESOURCE = re.compile(r"^create resource (\S+)")
# Slurm times: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS; UNLIMITED / INFINITE.
_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


@dataclass(frozen=True)
class QueueFacts:
    """One queue (PBS) or partition (Slurm) as the scheduler reports it; None: not set."""

    name: str
    min_nodes: int = 1
    max_nodes: int | None = None
    max_walltime: str | None = None  # HH:MM:SS
    min_walltime: str | None = None
    max_queued_per_user: int | None = None  # PBS max_queued [u:PBS_GENERIC=N]
    max_array_size: int | None = None
    open: bool = True  # enabled and started (PBS), State=UP (Slurm)
    default: bool = False  # Slurm's Default=YES
    # takes new jobs at all: PBS enabled (qsub refuses "Queue is not enabled" otherwise; a
    # queue not started takes jobs and runs none yet), Slurm State not DRAIN / INACTIVE
    enabled: bool = True


@dataclass(frozen=True)
class NodeFacts:
    """One compute node: its name, cores, GPUs, and whether it takes jobs now."""

    name: str
    cores: int
    gpus: int = 0
    state: str = ""


@dataclass(frozen=True)
class ServerFacts:
    """Server-wide rules; None where the command was not readable or did not say."""

    name: str | None = None
    default_queue: str | None = None
    job_history: bool | None = None
    max_array_size: int | None = None
    max_queued_per_user: int | None = None
    resources: tuple[str, ...] = ()  # custom resources the server defines (PBS)


def _int(value: str | None) -> int | None:
    value = (value or "").strip()
    return int(value) if value.isdigit() else None


def _blocks(text: str, header: re.Pattern[str]) -> list[tuple[str, str]]:
    """(header name, block text) for each block whose first line matches ``header``."""
    found: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        m = header.match(line)
        if m:
            found.append((m.group(1), []))
        elif found:
            found[-1][1].append(line)
    return [(name, "\n".join(lines)) for name, lines in found]


# ---- PBS ------------------------------------------------------------------------------------
def _per_user(value: str | None) -> int | None:
    m = _GENERIC_USER.search(value or "")
    return int(m.group(1)) if m else None


def parse_pbs_queues(text: str) -> list[QueueFacts]:
    """The execution queues in ``qstat -Qf`` output (routing queues hold no jobs of their own).

    >>> [q.name for q in parse_pbs_queues("Queue: r\\n    queue_type = Route\\n")]
    []
    """
    out = []
    for name, block in _blocks(text, re.compile(r"^Queue: (\S+)\s*$")):
        attrs = parse_attributes(block)
        if attrs.get("queue_type", "Execution").lower() != "execution":
            continue
        out.append(
            QueueFacts(
                name=name,
                min_nodes=_int(attrs.get("resources_min.nodect")) or 1,
                max_nodes=_int(attrs.get("resources_max.nodect")),
                max_walltime=walltime_text(attrs.get("resources_max.walltime")),
                min_walltime=walltime_text(attrs.get("resources_min.walltime")),
                max_queued_per_user=_per_user(attrs.get("max_queued")),
                max_array_size=_int(attrs.get("max_array_size")),
                open=all(attrs.get(flag, "True") == "True" for flag in ("enabled", "started")),
                enabled=attrs.get("enabled", "True") == "True",
            )
        )
    return out


def parse_pbsnodes(text: str) -> list[NodeFacts]:
    """The nodes in ``pbsnodes -av`` output: ``resources_available.ncpus`` and ``.ngpus``.

    >>> parse_pbsnodes("n1\\n     state = free\\n     resources_available.ncpus = 64\\n")
    [NodeFacts(name='n1', cores=64, gpus=0, state='free')]
    """
    out = []
    for name, block in _blocks(text, re.compile(r"^(\S+)\s*$")):
        attrs = parse_attributes(block)
        out.append(
            NodeFacts(
                name=name,
                cores=_int(attrs.get("resources_available.ncpus")) or 0,
                gpus=_int(attrs.get("resources_available.ngpus")) or 0,
                state=attrs.get("state", ""),
            )
        )
    return out


def parse_qmgr_server(text: str) -> ServerFacts:
    """Server rules from ``qmgr -c 'print server'`` output.

    >>> parse_qmgr_server("create resource filesystems\\nset server job_history_enable = True\\n")
    ServerFacts(name=None, default_queue=None, job_history=True, max_array_size=None, \
max_queued_per_user=None, resources=('filesystems',))
    """
    attrs: dict[str, str] = {}
    resources: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if m := _QMGR_SET.match(line):
            attrs[m.group(1)] = m.group(2).strip()
        elif m := _QMGR_RESOURCE.match(line):
            resources.append(m.group(1))
    return _server(attrs, None, tuple(resources))


def parse_pbs_server(text: str) -> ServerFacts:
    """Server rules from ``qstat -Bf`` (readable by every user; names no custom resources).

    >>> parse_pbs_server("Server: pbshost\\n    default_queue = workq\\n").default_queue
    'workq'
    """
    header = re.search(r"^Server: (\S+)\s*$", text, re.M)
    return _server(parse_attributes(text), header.group(1) if header else None, ())


def _server(attrs: dict[str, str], name: str | None, resources: tuple[str, ...]) -> ServerFacts:
    history = attrs.get("job_history_enable")
    return ServerFacts(
        name=name,
        default_queue=attrs.get("default_queue"),
        # OpenPBS keeps no history unless told (its default); an unset attribute means off.
        job_history=None if not attrs else history is not None and history.lower() == "true",
        max_array_size=_int(attrs.get("max_array_size")),
        max_queued_per_user=_per_user(attrs.get("max_queued")),
        resources=resources,
    )


def merge_servers(first: ServerFacts, second: ServerFacts) -> ServerFacts:
    """``first``'s facts, with ``second``'s where ``first`` has none (qmgr, then qstat -Bf)."""
    pick = {k: getattr(first, k) or getattr(second, k) for k in first.__dataclass_fields__}
    if first.job_history is not None:
        pick["job_history"] = first.job_history
    return ServerFacts(**pick)


# ---- Slurm ----------------------------------------------------------------------------------
def slurm_time(value: str | None) -> str | None:
    """A Slurm time limit as ``HH:MM:SS``; None for UNLIMITED or unreadable text.

    >>> slurm_time("1-00:00:00"), slurm_time("30"), slurm_time("2:00:00"), slurm_time("UNLIMITED")
    ('24:00:00', '00:30:00', '02:00:00', None)
    """
    m = _SLURM_TIME.match((value or "").strip())
    if not m:
        return None
    days, a, b, c = (int(g) if g else None for g in m.groups())
    if days is not None:  # D-HH[:MM[:SS]]
        seconds = days * 86400 + a * 3600 + (b or 0) * 60 + (c or 0)
    elif c is not None:  # HH:MM:SS
        seconds = a * 3600 + b * 60 + c
    else:  # MM or MM:SS
        seconds = a * 60 + (b or 0)
    return walltime_text(str(seconds))


def _words(block: str) -> dict[str, str]:
    """``Key=Value`` words of scontrol's output (values without spaces)."""
    return dict(w.split("=", 1) for w in block.split() if "=" in w)


def parse_scontrol_partitions(text: str) -> list[QueueFacts]:
    """The partitions in ``scontrol show partition`` output (either layout, -o or not).

    >>> p = parse_scontrol_partitions("PartitionName=debug\\n   Default=YES MaxNodes=UNLIMITED "
    ...     "MaxTime=01:00:00 MinNodes=0 State=UP TotalNodes=4\\n")
    >>> p[0].name, p[0].max_nodes, p[0].max_walltime, p[0].default
    ('debug', 4, '01:00:00', True)
    """
    out = []
    for block in re.split(r"(?=PartitionName=)", text):
        words = _words(block)
        if "PartitionName" not in words:
            continue
        total = _int(words.get("TotalNodes"))
        out.append(
            QueueFacts(
                name=words["PartitionName"],
                min_nodes=max(_int(words.get("MinNodes")) or 1, 1),
                max_nodes=_int(words.get("MaxNodes")) or total,
                max_walltime=slurm_time(words.get("MaxTime")),
                open=words.get("State", "UP") == "UP",
                default=words.get("Default") == "YES",
                enabled=words.get("State", "UP") not in ("DRAIN", "INACTIVE"),
            )
        )
    return out


def parse_sinfo_nodes(text: str) -> list[NodeFacts]:
    """Nodes from ``sinfo -h -N -o '%N %c %G %t'`` (name, CPUs, GRES, state), once each.

    >>> parse_sinfo_nodes("gpu1 64 gpu:a100:4 idle\\ngpu1 64 gpu:a100:4 idle\\nc1 32 (null) mix\\n")
    [NodeFacts(name='gpu1', cores=64, gpus=4, state='idle'), NodeFacts(name='c1', cores=32, \
gpus=0, state='mix')]
    """
    seen: dict[str, NodeFacts] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[0] in seen:
            continue
        gpus = sum(int(m.group(1)) for m in re.finditer(r"gpu(?::[^:,(]+)?:(\d+)", parts[2]))
        seen[parts[0]] = NodeFacts(parts[0], _int(parts[1]) or 0, gpus, parts[3])
    return list(seen.values())


def parse_slurm_config(text: str) -> ServerFacts:
    """ClusterName and MaxArraySize from ``scontrol show config`` (``Key = Value`` lines).

    >>> parse_slurm_config("ClusterName             = lake\\nMaxArraySize            = 1001\\n")
    ServerFacts(name='lake', default_queue=None, job_history=None, max_array_size=1001, \
max_queued_per_user=None, resources=())
    """
    attrs = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            attrs[key.strip()] = value.strip()
    return ServerFacts(
        name=attrs.get("ClusterName"), max_array_size=_int(attrs.get("MaxArraySize"))
    )
