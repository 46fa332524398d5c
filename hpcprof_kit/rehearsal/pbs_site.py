"""A small generic PBS cluster for the site rehearsal's twin (a stand-in: no PBS here).

Not ALCF: no ``filesystems`` resource, no account, no submit hook, Hydra ``mpiexec`` instead
of PALS, job history off (OpenPBS's default), and queues that the twin's configuration
describes rather than a system record, since ``hpcprof-kit site init`` writes the record from
what this server answers. Its ``qstat -Qf``, ``pbsnodes -av`` and ``qmgr -c 'p s'`` print what
a real OpenPBS 23.06 server printed, in the same shapes (the reference page's fixtures).

>>> server = {"name": "lake", "default_queue": "workq", "job_history": False, "cores": 2,
...           "queues": {"workq": {"max_nodes": 1, "max_walltime": "00:30:00",
...                                "max_queued": 1}}}
>>> print(qstat_queues(server, ["workq"])[0].splitlines()[5])
    max_queued = [u:PBS_GENERIC=1]
>>> view = record_view(server)
>>> view.queues["workq"].max_walltime, view.extra["queue_rules"]["workq"]
('00:30:00', {'max_jobs_per_user': 1})

A queue's ``max_array_size`` and the server's (``"max_array_size"`` beside ``"queues"``;
OpenPBS's default 10000) are printed and enforced alike.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

PBS_VERSION = "23.06.06"
MAX_ARRAY_SIZE = 10000  # OpenPBS's default max_array_size
_STATE_COUNT = "Transit:0 Queued:0 Held:0 Waiting:0 Running:0 Exiting:0 Begun:0"


def record_view(server: dict[str, Any]) -> SimpleNamespace:
    """What the twin's qsub checks, in a system record's shape, from the server's own
    configuration (the generic server has no record of its own: site init writes one)."""
    queues = {
        name: SimpleNamespace(
            min_nodes=int(q.get("min_nodes", 1)),
            max_nodes=int(q.get("max_nodes", 1)),
            max_walltime=str(q.get("max_walltime", "999:59:59")),
        )  # fmt: skip
        for name, q in server["queues"].items()
    }
    rules: dict[str, Any] = {}
    for name, q in server["queues"].items():
        said = {"max_jobs_per_user": q.get("max_queued"), "max_array_size": q.get("max_array_size")}
        if any(said.values()):
            rules[name] = {key: int(value) for key, value in said.items() if value}
    rules["max_array_size"] = int(server.get("max_array_size", MAX_ARRAY_SIZE))
    return SimpleNamespace(
        name=server["name"], account_required=False, default_filesystems="",
        default_queue=server["default_queue"], queues=queues,
        resources=tuple(server.get("resources", ())), extra={"queue_rules": rules},
    )  # fmt: skip


def _wrap(line: str, width: int = 79) -> str:
    """A long ``qstat -f`` line as PBS prints it: the rest on a tab-indented line."""
    return line if len(line) <= width else f"{line[:width]}\n\t{line[width:]}"


def qstat_queues(server: dict[str, Any], names: list[str]) -> list[str]:
    """``qstat -Qf`` blocks for ``names`` (every queue when empty), as OpenPBS prints them."""
    blocks = []
    for name in names or list(server["queues"]):
        q = server["queues"][name]
        lines = [f"Queue: {name}", "    queue_type = Execution", "    total_jobs = 0",
                 _wrap(f"    state_count = {_STATE_COUNT} ")]  # fmt: skip
        if q.get("max_queued"):
            lines.append(f"    max_queued = [u:PBS_GENERIC={q['max_queued']}]")
        if q.get("max_array_size"):
            lines.append(f"    max_array_size = {q['max_array_size']}")
        if q.get("max_nodes"):
            lines.append(f"    resources_max.nodect = {q['max_nodes']}")
        if q.get("max_walltime"):
            lines.append(f"    resources_max.walltime = {q['max_walltime']}")
        lines.append(f"    resources_min.nodect = {q.get('min_nodes', 1)}")
        if q.get("min_walltime"):
            lines.append(f"    resources_min.walltime = {q['min_walltime']}")
        lines += ["    resources_assigned.mem = 0kb", "    resources_assigned.ncpus = 0",
                  "    resources_assigned.nodect = 0", "    hasnodes = True",
                  f"    enabled = {q.get('enabled', True) is not False}", "    started = True",
                  ""]  # fmt: skip
        blocks.append("\n".join(lines))
    return blocks


def pbsnodes(server: dict[str, Any], hosts: list[str]) -> str:
    """``pbsnodes -av``: each node free, with its cores."""
    cores = int(server.get("cores", 1))
    out = []
    for host in hosts:
        out += [host, f"     Mom = {host}", "     Port = 15002",
                f"     pbs_version = {PBS_VERSION}", "     ntype = PBS", "     state = free",
                f"     pcpus = {cores}", "     resources_available.arch = linux",
                f"     resources_available.host = {host}",
                f"     resources_available.ncpus = {cores}",
                f"     resources_available.vnode = {host}",
                "     resources_assigned.ncpus = 0", "     resv_enable = True",
                "     sharing = default_shared", ""]  # fmt: skip
    return "\n".join(out) + "\n"


def qmgr_print_server(server: dict[str, Any]) -> str:
    """``qmgr -c 'p s'``: custom resources, queues, then the server's attributes."""
    lines = ["#", "# Create resources and set their properties.", "#"]
    for resource in server.get("resources", ()):
        lines += ["#", f"# Create and define resource {resource}", "#",
                  f"create resource {resource}", f"set resource {resource} type = string"]  # fmt: skip
    lines += ["#", "# Create queues and set their attributes.", "#"]
    for name, q in server["queues"].items():
        lines += ["#", f"# Create and define queue {name}", "#", f"create queue {name}",
                  f"set queue {name} queue_type = Execution"]  # fmt: skip
        if q.get("max_queued"):
            lines.append(f"set queue {name} max_queued = [u:PBS_GENERIC={q['max_queued']}]")
        if q.get("max_array_size"):
            lines.append(f"set queue {name} max_array_size = {q['max_array_size']}")
        if q.get("max_nodes"):
            lines.append(f"set queue {name} resources_max.nodect = {q['max_nodes']}")
        if q.get("max_walltime"):
            lines.append(f"set queue {name} resources_max.walltime = {q['max_walltime']}")
        lines += [f"set queue {name} enabled = {q.get('enabled', True) is not False}",
                  f"set queue {name} started = True"]  # fmt: skip
    lines += ["#", "# Set server attributes.", "#", "set server scheduling = True",
              f"set server default_queue = {server['default_queue']}",
              "set server log_events = 511"]  # fmt: skip
    if server.get("job_history"):
        lines.append("set server job_history_enable = True")
    return "\n".join(lines) + "\n"


def qstat_server(server: dict[str, Any], host: str) -> str:
    """``qstat -Bf``: the server's name and the rules any user may read."""
    return "\n".join([
        f"Server: {server['name']}", "    server_state = Active", f"    server_host = {host}",
        "    scheduling = True", "    total_jobs = 0",
        _wrap(f"    state_count = {_STATE_COUNT} "),
        f"    default_queue = {server['default_queue']}",
        f"    max_array_size = {server.get('max_array_size', MAX_ARRAY_SIZE)}",
        f"    pbs_version = {PBS_VERSION}", "",
    ])  # fmt: skip
