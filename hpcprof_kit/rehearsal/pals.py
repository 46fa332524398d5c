"""A stand-in for Cray PALS ``mpiexec``: PALS's flags and per-rank variables, Hydra underneath.

It takes the options PALS takes (``-n``, ``-ppn/--ppn``, ``-d/--depth``, ``--cpu-bind``,
``-l/--label``, ``--line-buffer``, ``--pmi``, ``--env``, ``--envall``, ``--hostfile``,
``--hosts``, ``--no-transfer``) and refuses any other the way a launcher does, before a rank
starts. Each rank gets PALS's variables (``PALS_RANKID``, ``PALS_LOCAL_RANKID``,
``PALS_LOCAL_SIZE``, ``PALS_NODEID``, ``PALS_DEPTH``, ``PMI_LOCAL_RANK``/``PMI_LOCAL_SIZE``;
``PMIX_RANK``/``PMIX_LOCAL_RANK`` only with ``--pmi=pmix``) and the CPUs the site would give
it (from the binding rules of :mod:`hpcprof_kit.affinity`), which are mapped onto this
machine's CPUs (site CPU c runs on local CPU c mod n) and exported as ``HPCPROF_SITE_CPUS``
so ``affinity_report`` shows the site's binding.

>>> parse_args(["-n", "4", "--ppn", "4", "--cpu-bind", "list:24-31:16-23:8-15:0-7", "-l",
...             "python3", "app.py"]).ranks
4
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hpcprof_kit.rehearsal.twin import TAG, Twin
from hpcprof_kit.systems import System

LAUNCH_VAR = "HPCPROF_TWIN_LAUNCH"
# Options that take a value (long and short spellings), and flags.
_VALUE = {"-n": "ranks", "--np": "ranks", "-np": "ranks", "-ppn": "ppn", "--ppn": "ppn",
          "-d": "depth", "--depth": "depth", "--cpu-bind": "cpu_bind", "--pmi": "pmi",
          "--env": "env", "-env": "env", "--hostfile": "hostfile", "--hosts": "hosts",
          "--mem-bind": "mem_bind"}  # fmt: skip
_FLAGS = {"-l": "label", "--label": "label", "--line-buffer": "line_buffer",
          "--envall": "envall", "--no-transfer": "no_transfer", "--transfer": "transfer"}  # fmt: skip
PMI_KINDS = ("pmix", "cray", "none")


class LaunchRefused(Exception):
    """mpiexec refuses its command line (the message is what the launcher prints)."""


@dataclass
class Launch:
    ranks: int = 0
    ppn: int = 0
    depth: int = 1
    cpu_bind: str = ""
    pmi: str = "cray"
    env: dict[str, str] = field(default_factory=dict)
    hostfile: str = ""
    hosts: str = ""
    label: bool = False
    command: list[str] = field(default_factory=list)


def _int(option: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise LaunchRefused(f"mpiexec: option {option} expects a number, got {text!r}") from None
    if value < 1:
        raise LaunchRefused(f"mpiexec: option {option} must be at least 1, got {value}")
    return value


def parse_args(args: list[str]) -> Launch:
    """PALS's command line, or LaunchRefused with the launcher's kind of message."""
    launch = Launch()
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            i += 1
            break
        if not word.startswith("-"):
            break
        key, eq, inline = word.partition("=")
        if key in _FLAGS and not eq:
            if _FLAGS[key] == "label":
                launch.label = True
            i += 1
            continue
        if key not in _VALUE:
            raise LaunchRefused(
                f"mpiexec: unrecognized option '{word}'\n"
                f"{TAG} PALS takes -n, -ppn/--ppn, -d/--depth, --cpu-bind, -l, --line-buffer, "
                "--pmi, --env, --envall, --hostfile, --hosts, --no-transfer"
            )
        if eq:
            value, i = inline, i + 1
        elif i + 1 < len(args):
            value, i = args[i + 1], i + 2
        else:
            raise LaunchRefused(f"mpiexec: option {key} needs a value")
        name = _VALUE[key]
        if name in ("ranks", "ppn", "depth"):
            setattr(launch, name, _int(key, value))
        elif name == "pmi":
            if value not in PMI_KINDS:
                raise LaunchRefused(
                    f"mpiexec: --pmi {value!r} is not one of {', '.join(PMI_KINDS)}"
                )
            launch.pmi = value
        elif name == "env":
            k, sep, v = value.partition("=")
            if not sep and i < len(args) and not args[i].startswith("-"):
                v, i = args[i], i + 1  # --env NAME VALUE
            launch.env[k] = v
        elif name in ("cpu_bind", "hostfile", "hosts"):
            setattr(launch, name, value)
    launch.command = args[i:]
    if not launch.command:
        raise LaunchRefused("mpiexec: no executable given")
    if not launch.ranks:
        raise LaunchRefused("mpiexec: -n (the number of ranks) is required")
    return launch


def _hosts(launch: Launch) -> list[str]:
    if launch.hosts:
        return [h for h in launch.hosts.split(",") if h]
    path = launch.hostfile or os.environ.get("PBS_NODEFILE", "")
    if not path:
        raise LaunchRefused("mpiexec: no hosts: pass --hostfile or --hosts (or run inside a job)")
    if not Path(path).is_file():
        raise LaunchRefused(f"mpiexec: cannot open hostfile {path!r}: No such file or directory")
    return list(dict.fromkeys(Path(path).read_text().split()))


def site_binding(record: System, launch: Launch) -> list[tuple[int, ...]]:
    """The CPUs each local rank gets on a site node (every CPU when there is no binding)."""
    from hpcprof_kit.affinity import plan_for
    from hpcprof_kit.errors import BindingError

    every = tuple(range(record.topology.logical_cpus))
    bind = launch.cpu_bind.strip()
    if not bind or bind == "none":
        return [every] * launch.ppn
    if bind == "numa":  # each rank on one NUMA domain's cores (and their hyperthreads), in turn
        domains = [d for d in record.topology.numa if d.cores]
        off = record.topology.sibling_offset
        return [
            tuple(sorted({*d.cores, *(c + off for c in d.cores if off)}))
            for d in (domains[i % len(domains)] for i in range(launch.ppn))
        ]
    text = f"depth:{launch.depth}" if bind == "depth" else bind
    try:
        plan = plan_for(record, launch.ppn if not bind.startswith("list:") else None, text)
    except BindingError as exc:
        raise LaunchRefused(f"mpiexec: --cpu-bind {bind}: {exc}") from None
    cpus = [r.cpus for r in plan.ranks]
    if len(cpus) < launch.ppn:
        raise LaunchRefused(
            f"mpiexec: --cpu-bind list has {len(cpus)} entries for {launch.ppn} ranks per node; "
            "give one entry per rank"
        )
    beyond = sorted({c for rank in cpus for c in rank if c >= len(every)})
    if beyond:
        raise LaunchRefused(
            f"mpiexec: --cpu-bind names CPUs {beyond[:4]} that a {record.name} node does not have "
            f"(0-{len(every) - 1})"
        )
    return cpus[: launch.ppn]


def mpiexec(twin: Twin, args: list[str]) -> int:
    """Check the command line as PALS would, then start the ranks with Hydra."""
    try:
        launch = parse_args(args)
        hosts = _hosts(launch)
        launch.ppn = launch.ppn or math.ceil(launch.ranks / len(hosts))
        nodes = math.ceil(launch.ranks / launch.ppn)
        if nodes > len(hosts):
            raise LaunchRefused(
                f"mpiexec: {launch.ranks} ranks at {launch.ppn} per node need {nodes} nodes; "
                f"the job has {len(hosts)} ({', '.join(hosts)})"
            )
        site = site_binding(twin.record(), launch)
    except LaunchRefused as exc:
        print(str(exc), file=sys.stderr)
        twin.log("launch", ok=False, args=args, message=str(exc).splitlines()[0])
        return 1
    local = sorted(os.sched_getaffinity(0))
    mapped = [sorted({local[c % len(local)] for c in cpus}) for cpus in site]
    plan = {"ranks": launch.ranks, "ppn": launch.ppn, "nodes": nodes, "depth": launch.depth,
            "pmi": launch.pmi, "env": launch.env, "site_cpus": [list(c) for c in site],
            "local_cpus": mapped, "hosts": hosts[:nodes],
            "logical_cpus": max(max(c) for c in site) + 1 if site else 0}  # fmt: skip
    # oneCCL told to find its peers through PMIx gets no PMIx without --pmi=pmix: on the site
    # every rank's oneCCL init fails. The launch itself is valid; the ranks judge it.
    pmix_missing = os.environ.get("CCL_PROCESS_LAUNCHER") == "pmix" and launch.pmi != "pmix"
    twin.log("launch", ok=True, args=args, ranks=launch.ranks, ppn=launch.ppn, nodes=nodes,
             pmi=launch.pmi, cpu_bind=launch.cpu_bind, mapped=mapped, site=plan["site_cpus"],
             pmix_missing=pmix_missing)  # fmt: skip
    # Every twin node is this machine: Hydra must neither read PBS_NODEFILE nor ssh anywhere.
    hydra = [
        twin.config["hydra"],
        "-launcher",
        "fork",
        "-hosts",
        "localhost",
        "-n",
        str(launch.ranks),
    ]
    if launch.label:
        hydra += ["-prepend-pattern", "%r: "]
    env = dict(os.environ, **{LAUNCH_VAR: json.dumps(plan)})
    return subprocess.call([*hydra, *twin.standin_argv("rank"), *launch.command], env=env)


def rank(twin: Twin, command: list[str]) -> int:
    """One rank: PALS's variables, the mapped binding, then the command (exit code logged)."""
    from hpcprof_kit.affinity.cpulist import format_cpus

    plan = json.loads(os.environ.pop(LAUNCH_VAR))
    me = int(os.environ["PMI_RANK"])
    ppn, world = plan["ppn"], plan["ranks"]
    local, node = me % ppn, me // ppn
    on_node = min(ppn, world - node * ppn)
    env = {
        "PALS_RANKID": me, "PALS_LOCAL_RANKID": local, "PALS_LOCAL_SIZE": on_node,
        "PALS_NODEID": node, "PALS_DEPTH": plan["depth"], "PMI_LOCAL_RANK": local,
        "PMI_LOCAL_SIZE": on_node, "PMI_SIZE": world,
    }  # fmt: skip
    if plan["pmi"] == "pmix":
        env.update(PMIX_RANK=me, PMIX_LOCAL_RANK=local, PMIX_LOCAL_SIZE=on_node)
    record = twin.record()
    env.update(
        HPCPROF_SITE_CPUS=format_cpus(plan["site_cpus"][local]),
        HPCPROF_SITE_ONLINE=f"0-{record.topology.logical_cpus - 1}",
        HPCPROF_SITE_HOST=plan["hosts"][node],
    )
    os.environ.update({k: str(v) for k, v in env.items()})
    os.environ.update(plan["env"])
    os.sched_setaffinity(0, plan["local_cpus"][local])
    twin.log("rank_start", rank=me, local_rank=local, node=node,
             site_cpus=plan["site_cpus"][local], command=command)  # fmt: skip
    try:
        child = subprocess.Popen(command, close_fds=False)  # Hydra's PMI_FD must reach the app
    except OSError as exc:
        print(f"{TAG} rank {me}: cannot start {command[0]!r}: {exc}", file=sys.stderr)
        twin.log("rank_end", rank=me, exit_code=127)
        return 127
    signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
    code = child.wait()
    twin.log("rank_end", rank=me, exit_code=code)
    return code
