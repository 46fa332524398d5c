"""What each rank really got: the affinity report line, its parser, and the comparison with a plan.

Every rank of ``python -m hpcprof_kit.apps.affinity_report`` prints one line::

    affinity_report host=x1 rank=0 local_rank=0 world_size=2 cpus=0 online=0-1 numa=0 device=cpu

:func:`parse_report` turns a job's stdout (launcher prefixes such as ``0: `` or ``[0] `` are
fine) into a table, and :func:`compare` sets it beside a :class:`BindingPlan`.

>>> table = parse_report("affinity_report host=a rank=1 local_rank=1 world_size=2 cpus=0-1 "
...                      "online=0-1 numa=0 device=cpu")
>>> table[["rank", "cpus", "unbound"]].to_dict("records")
[{'rank': 1, 'cpus': '0-1', 'unbound': True}]
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from hpcprof_kit.affinity.cpulist import format_cpus, parse_cpus
from hpcprof_kit.affinity.plan import BindingPlan
from hpcprof_kit.errors import BindingError

TAG = "affinity_report"
FIELDS = ("host", "rank", "local_rank", "world_size", "cpus", "online", "numa", "device")
# Strict field order, so two lines glued together by a launcher's output merge still split.
_LINE = re.compile(TAG + "".join(rf"\s+{k}=(?P<{k}>\S+?)" for k in FIELDS) + rf"(?=\s|$|{TAG})")


def online_cpus(sys_root: str | os.PathLike[str] = "/sys") -> tuple[int, ...]:
    """Every CPU the machine has online (what an unbound process may run on)."""
    path = Path(sys_root) / "devices" / "system" / "cpu" / "online"
    if path.exists():
        return parse_cpus(path.read_text().strip())
    return tuple(range(os.cpu_count() or 1))


def numa_nodes_of(cpus, sys_root: str | os.PathLike[str] = "/sys") -> tuple[int, ...]:
    """The NUMA nodes that hold any of ``cpus`` (``(0,)`` when the machine shows none)."""
    found = set()
    for node_dir in (Path(sys_root) / "devices" / "system" / "node").glob("node[0-9]*"):
        text = (node_dir / "cpulist").read_text().strip() if (node_dir / "cpulist").exists() else ""
        if text and set(parse_cpus(text)) & set(cpus):
            found.add(int(node_dir.name[4:]))
    return tuple(sorted(found)) or (0,)


def report_line(fields: dict[str, object]) -> str:
    """One rank's line: ``affinity_report key=value ...`` in :data:`FIELDS` order.

    >>> report_line({"host": "h", "rank": 0, "local_rank": 0, "world_size": 1, "cpus": "0",
    ...              "online": "0-1", "numa": "0", "device": "cpu"})
    'affinity_report host=h rank=0 local_rank=0 world_size=1 cpus=0 online=0-1 numa=0 device=cpu'
    """
    return TAG + " " + " ".join(f"{k}={fields[k]}" for k in FIELDS)


def parse_report(text: str):
    """The report lines found in ``text`` as a DataFrame, one row per rank, sorted by rank.

    Columns: host, rank, local_rank, world_size, cpus, online, numa, device, n_cpus, unbound
    (the rank may run on every online CPU). BindingError when no line is found.
    """
    import pandas as pd

    rows = []
    for lineno, m in enumerate(_LINE.finditer(text), 1):
        pairs = m.groupdict()
        cpus = parse_cpus(pairs["cpus"], where=f"report entry {lineno} cpus")
        online = parse_cpus(pairs["online"], where=f"report entry {lineno} online")
        rows.append(
            {
                "host": pairs["host"],
                "rank": int(pairs["rank"]),
                "local_rank": int(pairs["local_rank"]),
                "world_size": int(pairs["world_size"]),
                "cpus": format_cpus(cpus),
                "online": format_cpus(online),
                "numa": pairs["numa"],
                "device": pairs["device"],
                "n_cpus": len(cpus),
                "unbound": set(cpus) == set(online),
            }
        )
    if not rows:
        raise BindingError(
            f"no '{TAG}' line found in {len(text.splitlines())} lines of output; run "
            "python -m hpcprof_kit.apps.affinity_report under the launcher and pass its stdout"
        )
    return pd.DataFrame(rows).sort_values("rank", ignore_index=True)


def compare(plan: BindingPlan, report):
    """Plan and reality side by side, one row per rank, with a verdict and its reason.

    Verdicts: ``ok``; ``unbound`` (the rank may run on every online CPU); ``mismatch`` (its
    CPUs differ from the plan's); ``device`` (another device than planned); ``missing`` (the
    plan has the rank, the report does not). Ranks are matched per host by local rank.

    >>> from hpcprof_kit.affinity import plan_for
    >>> plan = plan_for("local", 1, "user:0")
    >>> line = ("affinity_report host=a rank=0 local_rank=0 world_size=1 cpus=0 online=0-1 "
    ...         "numa=0 device=cpu")
    >>> compare(plan, parse_report(line)).loc[0, "verdict"]
    'ok'
    """
    import pandas as pd

    if isinstance(report, str):
        report = parse_report(report)
    rows = []
    hosts = list(dict.fromkeys(report["host"])) or [""]
    for host in hosts:
        here = report[report["host"] == host].set_index("local_rank")
        for planned in plan.ranks:
            row = {"host": host, "local_rank": planned.rank, "planned": format_cpus(planned.cpus)}
            if planned.rank not in here.index:
                rows.append({**row, "rank": -1, "got": "", "verdict": "missing",
                             "message": f"local rank {planned.rank} did not report on {host}"})  # fmt: skip
                continue
            got = here.loc[planned.rank]
            rows.append({**row, "rank": int(got["rank"]), "got": got["cpus"],
                         **_verdict(plan, planned, got)})  # fmt: skip
    columns = ["host", "rank", "local_rank", "planned", "got", "verdict", "message"]
    return pd.DataFrame(rows, columns=columns)


def _verdict(plan: BindingPlan, planned, got) -> dict[str, str]:
    got_cpus = set(parse_cpus(got["cpus"]))
    same = got_cpus == set(planned.cpus)
    if bool(got["unbound"]) and (plan.style == "none" or not same):
        return {
            "verdict": "unbound",
            "message": f"rank {got['rank']} may run on every online CPU ({got['online']}): "
            "the OS can move it mid-step",
        }
    if not same:
        return {
            "verdict": "mismatch",
            "message": f"rank {got['rank']} got CPUs {got['cpus']}, the plan says "
            f"{format_cpus(planned.cpus)}: check the launcher's binding flags",
        }
    want = None if planned.device is None else str(planned.device)
    if want is not None and got["device"] not in ("cpu", "?") and got["device"] != want:
        return {
            "verdict": "device",
            "message": f"rank {got['rank']} drives device {got['device']}, the plan says {want}",
        }
    return {"verdict": "ok", "message": ""}
