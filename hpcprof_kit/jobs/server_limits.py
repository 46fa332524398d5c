"""The per-user and array limits a PBS server states for a queue, read when a sweep is
submitted there and its system record does not say them.

A real PBS counts an array of N subjobs as N jobs against the queue's ``max_queued`` per user
(OpenPBS 23.06: ``max_queued = [u:PBS_GENERIC=3]`` refuses ``-J 0-3`` with exit 38 and takes
``-J 0-2``) and refuses an array longer than the queue's or the server's ``max_array_size``
(exit 3). A site record says so in ``[queue_rules.QUEUE]`` (``max_jobs_per_user``,
``max_array_size``); where it does not, the kit reads ``qstat -Qf QUEUE`` and ``qstat -Bf``
(both readable by every user) with the parsers of ``hpcprof_kit.systems.site_facts``. When the
queue cannot be read, the sweep goes on as the record alone says, and one warning (once) says
that the limit is unknown; while the server cannot be reached at all, nothing is said: the
submission meets the same server and its error is the one to read.

>>> told = read_limits("workq", "Queue: workq\\n    max_queued = [u:PBS_GENERIC=1]\\n", None)
>>> told.rules(), told.said["max_jobs_per_user"]
({'max_jobs_per_user': 1}, 'the server says max_queued = [u:PBS_GENERIC=1] (qstat -Qf workq)')
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hpcprof_kit.jobs.queues import _warn, run_query
from hpcprof_kit.systems import site_facts as sf

__all__ = ["RULES", "ServerLimits", "ask_server", "read_limits"]

# The queue rules a server can state, by their names in a system record's [queue_rules].
RULES = ("max_jobs_per_user", "max_array_size")
Query = Callable[[Sequence[str]], "str | None"]


@dataclass(frozen=True)
class ServerLimits:
    """What the server said of one queue; None where it sets no such limit."""

    queue: str
    max_jobs_per_user: int | None = None  # max_queued [u:PBS_GENERIC=N], the queue's or server's
    max_array_size: int | None = None  # the smaller of the queue's and the server's
    said: dict[str, str] = field(default_factory=dict)  # rule -> the server's words, and where

    def rules(self) -> dict[str, int]:
        """The limits as a record's ``[queue_rules.QUEUE]`` writes them (unset ones left out)."""
        return {rule: getattr(self, rule) for rule in RULES if getattr(self, rule) is not None}


def read_limits(queue: str, queue_text: str | None, server_text: str | None) -> ServerLimits | None:
    """The limits of ``queue`` in ``qstat -Qf QUEUE`` and ``qstat -Bf`` output (pure); None
    when the first does not show ``queue``. A routing queue holds no jobs itself: only the
    server's limits apply to it here.

    >>> read_limits("q", "Queue: q\\n    max_array_size = 50\\n",
    ...             "Server: pbshost\\n    max_array_size = 10000\\n").said["max_array_size"]
    'the server says max_array_size = 50 (qstat -Qf q)'
    """
    if not re.search(rf"^Queue: {re.escape(queue)}\s*$", queue_text or "", re.M):
        return None
    found = next((q for q in sf.parse_pbs_queues(queue_text or "") if q.name == queue), None)
    found = found or sf.QueueFacts(queue)
    server = sf.parse_pbs_server(server_text or "")
    here, there = f"qstat -Qf {queue}", "qstat -Bf"
    said: dict[str, str] = {}
    per_user = found.max_queued_per_user or server.max_queued_per_user
    if per_user:
        where = here if found.max_queued_per_user else there
        said["max_jobs_per_user"] = (
            f"the server says max_queued = [u:PBS_GENERIC={per_user}] ({where})"
        )
    sizes = [(n, w) for n, w in ((found.max_array_size, here), (server.max_array_size, there)) if n]
    size = min(sizes)[0] if sizes else None
    if size:
        said["max_array_size"] = f"the server says max_array_size = {size} ({min(sizes)[1]})"
    return ServerLimits(queue, per_user, size, said)


def ask_server(queue: str, query: Query = run_query) -> ServerLimits | None:
    """Ask ``qstat -Qf QUEUE`` (and ``qstat -Bf``, where readable) through ``query`` (argv ->
    stdout, or None when it cannot answer). None, with one warning said once per queue, when
    the queue's limits cannot be read.

    >>> said = "Queue: workq\\n    max_queued = [u:PBS_GENERIC=1]\\n"
    >>> ask_server("workq", lambda argv: said if "-Qf" in argv else None).max_jobs_per_user
    1
    """
    text = query(["qstat", "-Qf", queue])
    if text is None:
        if query is run_query and server_down(["qstat", "-Qf", queue]):
            return None  # the submission meets the same server and says so: no advice here
        _warn(_unknown(queue, f"qstat -Qf {queue} did not answer here"))
        return None
    found = read_limits(queue, text, query(["qstat", "-Bf"]))
    if found is None:
        _warn(_unknown(queue, f"qstat -Qf {queue} does not show that queue"))
    return found


# What PBS clients say when their server cannot be reached (a real OpenPBS 23.06 server
# stopped: "Connection refused", "cannot connect to server HOST (errno=15010)").
_DOWN = re.compile(r"Connection refused|cannot connect to server|errno=15010")


def server_down(argv: Sequence[str]) -> bool:
    """Whether ``argv`` (a qstat that just failed) fails because the server is unreachable,
    rather than because it refused this query."""
    import subprocess

    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return True  # no answer at all: the same as a server that is down
    return done.returncode != 0 and bool(_DOWN.search(done.stderr + done.stdout))


def _unknown(queue: str, why: str) -> str:
    return (
        f"queue {queue!r}: how many queued jobs one user may have there (max_queued) and how "
        f"long an array may be (max_array_size) are unknown: the system record does not say, "
        f"and {why}; the sweep is submitted as one array, which PBS refuses (qsub exit 38) "
        f"where the queue takes fewer queued jobs per user than it has variants: then write "
        f"max_jobs_per_user = 1 under [queue_rules.{queue}] in the record"
    )
