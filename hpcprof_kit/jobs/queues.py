"""Queues a system record does not list: workshop reservations and queues the scheduler knows.

A system record lists the site's standing queues (``[queues.*]`` in its TOML file). A workshop
runs in a reservation: on PBS its queue is named after the reservation (``R123456``), or the
site makes a queue with the workshop's own name. ``resolve_queue(system, name)`` finds the
limits a job is checked against, in this order:

1. the reservation the caller passes with its limits (``reservation=``: a workshop file's queue,
   carried by ``JobSpec.reservation``; no warning, no scheduler asked);
2. the system record (``System.queue``, which stays pure);
3. the scheduler, when its commands are on PATH: ``pbs_rstat -f NAME`` for reservation-shaped
   names, then ``qstat -Qf NAME``; the queue is accepted with a :class:`KitWarning` (said once
   per process: :func:`say_warnings_again` forgets) and the limits the scheduler reports;
4. a PBS reservation-shaped name (``R<digits>`` or ``S<digits>``) that no scheduler here can
   describe: accepted with a warning and only the generic checks (nodes >= 1, walltime format);
5. anything else: the record's SpecError, which lists the known queues and how to use a
   reservation.

The parsers are pure functions of the commands' text:

>>> limits = parse_qstat_queue('''Queue: debug
...     queue_type = Execution
...     resources_max.nodect = 2
...     resources_max.walltime = 01:00:00
...     resources_min.nodect = 1
... ''')
>>> limits.describe()
'1-2 nodes, walltime at most 01:00:00'
"""

from __future__ import annotations

import re
import shutil
import subprocess
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hpcprof_kit.errors import KitWarning, SpecError
from hpcprof_kit.systems import Queue, System

QUERY_TIMEOUT_S = 10.0  # a scheduler that does not answer by then cannot say
# Names a scheduler gives reservation queues (PBS: R<id> advance, S<id> standing reservations).
RESERVATION_NAMES: dict[str, re.Pattern[str]] = {"pbs": re.compile(r"^[RS]\d+\Z")}
# "name = value" lines of qstat -f / pbs_rstat -f; long values wrap onto indented lines.
_ATTRIBUTE = re.compile(r"^\s*([A-Za-z_][\w.]*) = (.*)$")
_HMS = re.compile(r"^(\d+):([0-5]?\d):([0-5]?\d)\Z")
# A walltime as a job spec and a workshop file write it.
_WALLTIME = re.compile(r"^(\d{1,3}):([0-5]\d):([0-5]\d)\Z")


def walltime_seconds(text: str) -> int:
    """Seconds in an ``HH:MM:SS`` walltime (the one rule for specs, queues and workshops).

    >>> walltime_seconds("01:30:00")
    5400
    """
    m = _WALLTIME.match(text or "")
    if not m:
        raise SpecError(
            f"walltime {text!r} is not HH:MM:SS (minutes and seconds 00-59); "
            "write it like '00:10:00'"
        )
    h, mi, s = (int(g) for g in m.groups())
    return h * 3600 + mi * 60 + s


@dataclass(frozen=True)
class QueueLimits:
    """What a job in one queue may ask for; ``None`` where nobody could say."""

    name: str
    min_nodes: int = 1
    max_nodes: int | None = None
    max_walltime: str | None = None  # HH:MM:SS
    source: str = ""  # where the limits come from: a record file, a command, a workshop file
    note: str = ""  # e.g. when a reservation starts and ends

    @classmethod
    def from_record(cls, queue: Queue, system: System) -> QueueLimits:
        return cls(queue.name, queue.min_nodes, queue.max_nodes, queue.max_walltime,
                   system.source or f"{system.name}.toml")  # fmt: skip

    def describe(self) -> str:
        """The limits in words.

        >>> QueueLimits("R1", max_nodes=8).describe()
        '1-8 nodes, walltime not limited here'
        """
        nodes = f"{self.min_nodes}-{self.max_nodes}" if self.max_nodes else f">= {self.min_nodes}"
        wall = f"at most {self.max_walltime}" if self.max_walltime else "not limited here"
        return f"{nodes} nodes, walltime {wall}"


def looks_like_reservation(scheduler: str, name: str) -> bool:
    """Whether ``name`` has the shape of the scheduler's reservation queues.

    >>> looks_like_reservation("pbs", "R123456"), looks_like_reservation("pbs", "debug")
    (True, False)
    """
    pattern = RESERVATION_NAMES.get(scheduler)
    return bool(pattern and pattern.match(name))


# ---- parsing the scheduler's text (pure) ---------------------------------------------------
def parse_attributes(text: str) -> dict[str, str]:
    """The ``name = value`` lines of ``qstat -f``-style output (wrapped values joined).

    >>> parse_attributes("Queue: q\\n    comment = a long\\n\\tcomment\\n    enabled = True\\n")
    {'comment': 'a long comment', 'enabled': 'True'}
    """
    found: dict[str, str] = {}
    last = None
    for line in text.splitlines():
        m = _ATTRIBUTE.match(line)
        if m:
            last = m.group(1)
            found[last] = m.group(2).strip()
        elif last is not None and line[:1] in (" ", "\t") and line.strip():
            found[last] = f"{found[last]} {line.strip()}"
        else:
            last = None  # a header ("Queue: q", "Resv ID: R1.srv") or a blank line
    return found


def walltime_text(value: str | None) -> str | None:
    """A scheduler's walltime (``H:MM:SS`` or seconds) as ``HH:MM:SS``; None if unreadable.

    >>> walltime_text("1:00:00"), walltime_text("28800"), walltime_text("soon")
    ('01:00:00', '08:00:00', None)
    """
    value = (value or "").strip()
    m = _HMS.match(value)
    if m:
        seconds = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))
    elif value.isdigit():
        seconds = int(value)
    else:
        return None
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _count(value: str | None) -> int | None:
    value = (value or "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def parse_qstat_queue(text: str) -> QueueLimits | None:
    """Limits of the queue in ``qstat -Qf NAME`` output; None when the text describes no queue.

    Reads ``resources_max.walltime``, ``resources_max.nodect`` and ``resources_min.nodect``;
    a queue that is not enabled or not started says so in ``note``.
    """
    header = re.search(r"^Queue: (\S+)\s*$", text, re.M)
    if not header:
        return None
    attrs = parse_attributes(text)
    closed = [flag for flag in ("enabled", "started") if attrs.get(flag, "True") != "True"]
    return QueueLimits(
        name=header.group(1),
        min_nodes=_count(attrs.get("resources_min.nodect")) or 1,
        max_nodes=_count(attrs.get("resources_max.nodect")),
        max_walltime=walltime_text(attrs.get("resources_max.walltime")),
        note=f"the queue is not {' and not '.join(closed)}" if closed else "",
    )


def parse_pbs_rstat(text: str) -> QueueLimits | None:
    """Limits of the reservation in ``pbs_rstat -f NAME`` output; None when it shows none.

    Walltime: ``Resource_List.walltime``, else ``reserve_duration`` (seconds). Nodes:
    ``Resource_List.nodect``, else the hosts in ``resv_nodes``. ``note`` keeps the state and
    the start and end times, since a job must also end before the reservation does.
    """
    header = re.search(r"^Resv ID: (\S+)\s*$", text, re.M)
    if not header:
        return None
    attrs = parse_attributes(text)
    hosts = set(re.findall(r"\(([^:)+]+)", attrs.get("resv_nodes", "")))
    when = [
        f"{key} {attrs[f'reserve_{key}']}"
        for key in ("start", "end")
        if attrs.get(f"reserve_{key}")
    ]
    state = attrs.get("reserve_state", "")
    return QueueLimits(
        name=attrs.get("queue") or header.group(1).split(".")[0],
        max_nodes=_count(attrs.get("Resource_List.nodect")) or len(hosts) or None,
        max_walltime=walltime_text(attrs.get("Resource_List.walltime"))
        or walltime_text(attrs.get("reserve_duration")),
        note=", ".join(filter(None, [f"reservation {header.group(1)}", state, *when])),
    )


# ---- asking the scheduler ------------------------------------------------------------------
@dataclass(frozen=True)
class Lookup:
    """One scheduler command that can describe a queue: ``argv + [name]``, parsed by ``parse``."""

    argv: tuple[str, ...]
    parse: Callable[[str], QueueLimits | None]
    reservations_only: bool = False


# Per scheduler, the commands asked about a queue the record does not list, in order.
LOOKUPS: dict[str, tuple[Lookup, ...]] = {
    "pbs": (
        Lookup(("pbs_rstat", "-f"), parse_pbs_rstat, reservations_only=True),
        Lookup(("qstat", "-Qf"), parse_qstat_queue),
    ),
}


def run_query(argv: Sequence[str], timeout: float = QUERY_TIMEOUT_S) -> str | None:
    """The command's stdout; None when it is not on PATH, fails or does not answer in time.

    >>> run_query(["hpcprof-no-such-command", "-f", "R1"]) is None
    True
    """
    if not argv or shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _lookups(scheduler: str, name: str) -> list[Lookup]:
    reservation = looks_like_reservation(scheduler, name)
    return [q for q in LOOKUPS.get(scheduler, ()) if reservation or not q.reservations_only]


def scheduler_limits(
    scheduler: str, name: str, timeout: float = QUERY_TIMEOUT_S
) -> QueueLimits | None:
    """The limits the scheduler's own commands report for queue ``name``; None if none can say."""
    for lookup in _lookups(scheduler, name):
        command = [*lookup.argv, name]
        text = run_query(command, timeout)
        found = lookup.parse(text) if text else None
        if found is not None and found.name == name:  # the queue asked about, not another
            return replace(found, source=" ".join(command))
    return None


# ---- a reservation given with its limits (a workshop file's queue) --------------------------
def reservation_limits(
    name: str, limits: Mapping[str, Any], source: str = "the spec's reservation"
) -> QueueLimits:
    """The limits of reservation queue ``name`` from ``{"nodes": N, "walltime": "HH:MM:SS"}``,
    as a workshop file gives them (``Workshop.reservations``; ``JobSpec.reservation``).

    >>> from hpcprof_kit.systems import load_system
    >>> known = reservation_limits("alcf_workshop", {"nodes": 8, "walltime": "02:00:00"})
    >>> resolve_queue(load_system("aurora"), "alcf_workshop", reservation=known).describe()
    '1-8 nodes, walltime at most 02:00:00'
    """
    if not isinstance(limits, Mapping):
        raise SpecError(
            f"reservation {limits!r} of queue {name!r} is not a table; write "
            '{"nodes": 8, "walltime": "02:00:00"}'
        )
    unknown = sorted(set(limits) - {"nodes", "walltime"})
    if unknown:
        raise SpecError(
            f"reservation of queue {name!r} has unknown keys {unknown}; it takes 'nodes' "
            "(the most nodes) and 'walltime' (HH:MM:SS)"
        )
    nodes, walltime = limits.get("nodes"), limits.get("walltime")
    if nodes is not None and (not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1):
        raise SpecError(
            f"reservation nodes {nodes!r} of queue {name!r} must be a whole number of at least 1"
        )
    if walltime is not None:
        walltime_seconds(str(walltime))
    return QueueLimits(name, 1, nodes, None if walltime is None else str(walltime), source)


# ---- the rule --------------------------------------------------------------------------------
def resolve_queue(
    system: System,
    name: str | None,
    timeout: float = QUERY_TIMEOUT_S,
    reservation: QueueLimits | None = None,
) -> QueueLimits:
    """The limits a job in queue ``name`` (None: the default) is checked against on ``system``.

    Warns (KitWarning) when it accepts a queue the record does not list; raises the record's
    SpecError for a name that is neither listed, the ``reservation`` passed, known to the
    scheduler, nor reservation-shaped. The scheduler is asked only about such unlisted names.

    >>> from hpcprof_kit.systems import load_system
    >>> resolve_queue(load_system("aurora"), "debug").describe()
    '1-2 nodes, walltime at most 01:00:00'
    """
    if name is None:
        return QueueLimits.from_record(system.queue(None), system)
    if set(system.queues) == {""}:
        # A generic record (one unnamed queue): any site partition, with those limits.
        return replace(QueueLimits.from_record(system.queue(""), system), name=name)
    if not name:  # never ask a scheduler about an empty name: the record refuses it
        return QueueLimits.from_record(system.queue(name), system)
    if reservation is not None and reservation.name == name:
        return reservation
    if name in system.queues:
        return QueueLimits.from_record(system.queue(name), system)
    record = system.source or f"{system.name}.toml"
    found = scheduler_limits(system.scheduler, name, timeout)
    if found is not None:
        note = f"; {found.note}" if found.note else ""
        _warn(
            f"queue {name!r} is not listed in {record}; {found.source} describes it "
            f"({found.describe()}{note}), so the job is checked against those limits"
        )
        return found
    if looks_like_reservation(system.scheduler, name):
        asked = [" ".join([*q.argv, name]) for q in _lookups(system.scheduler, name)]
        here = [a for a in asked if shutil.which(a.split()[0])]
        why = (
            f"{' and '.join(here)} did not describe it (is the reservation confirmed, and yours?)"
            if here
            else f"no scheduler command ({', '.join(a.split()[0] for a in asked)}) is on PATH "
            "here to read its limits"
        )
        _warn(
            f"queue {name!r} is not listed in {record}; it is accepted as a reservation queue, "
            f"but {why}: only nodes >= 1 and the walltime format are checked, and the "
            "scheduler applies the reservation's own limits"
        )
        return QueueLimits(name, source="no limits known")
    # Not listed, registered, known or reservation-shaped: the record's SpecError says so.
    return QueueLimits.from_record(system.queue(name), system)


# The queue warnings given in this process: a spec is checked at every validate, render and
# submit (a notebook's every cell), and the same warning each time would bury the rest.
_SAID: set[str] = set()


def _warn(message: str) -> None:
    if message in _SAID:
        return
    _SAID.add(message)
    warnings.warn(message, KitWarning, stacklevel=4)


def say_warnings_again() -> None:
    """Forget which queue warnings were given: the next check of each says its warning again
    (each is otherwise said once per process).

    >>> say_warnings_again()
    """
    _SAID.clear()
