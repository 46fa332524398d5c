"""A site record written from what a PBS or Slurm cluster says (``hpcprof-kit site init``).

The scheduler tells the queues, their limits, the nodes and the server's rules; the record
leaves for the user only what no scheduler knows (modules, the Python environment, the MPI
launcher), each marked ``EDIT``. Nothing ALCF-only is written: no account, no
``filesystems`` resource, no PALS flags, no minimum walltime, no CCL variables.

>>> from hpcprof_kit.systems.site_facts import NodeFacts, QueueFacts, ServerFacts
>>> facts = ClusterFacts("pbs", (QueueFacts("workq"),), (NodeFacts("n1", 8),), ServerFacts())
>>> text = record_text(facts, "lake")
>>> 'scheduler = "pbs"' in text, "filesystems=" in text, "account_required = false" in text
(True, False, True)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcprof_kit.errors import SpecError
from hpcprof_kit.systems import _SYSTEM_NAME, system_names
from hpcprof_kit.systems import site_facts as sf

# A queue the server gives no walltime limit: the longest walltime a job spec can write.
NO_LIMIT = "999:59:59"

# What each scheduler is asked, in order: (what it tells, argv, parser, required).
Query = Callable[[Sequence[str]], "str | None"]


@dataclass(frozen=True)
class ClusterFacts:
    """Everything site init read from one cluster."""

    scheduler: str  # "pbs" | "slurm"
    queues: tuple[sf.QueueFacts, ...]
    nodes: tuple[sf.NodeFacts, ...]
    server: sf.ServerFacts
    asked: tuple[str, ...] = ()  # the commands that answered


def read_cluster(scheduler: str, query: Query) -> ClusterFacts:
    """Ask the scheduler's commands through ``query`` (argv -> stdout or None).

    SpecError when the queues or nodes cannot be read (the command's name and the fix).
    """
    if scheduler == "pbs":
        asked = {
            "qstat -Qf": query(["qstat", "-Qf"]),
            "pbsnodes -av": query(["pbsnodes", "-av"]),
            "qmgr -c 'p s'": query(["qmgr", "-c", "p s"]),
            "qstat -Bf": query(["qstat", "-Bf"]),
        }
        _need(asked, ("qstat -Qf", "pbsnodes -av"), "PBS")
        server = sf.merge_servers(
            sf.parse_qmgr_server(asked["qmgr -c 'p s'"] or ""),
            sf.parse_pbs_server(asked["qstat -Bf"] or ""),
        )
        queues = sf.parse_pbs_queues(asked["qstat -Qf"] or "")
        nodes = sf.parse_pbsnodes(asked["pbsnodes -av"] or "")
    elif scheduler == "slurm":
        asked = {
            "scontrol show partition": query(["scontrol", "show", "partition"]),
            "sinfo": query(["sinfo", "-h", "-N", "-o", "%N %c %G %t"]),
            "scontrol show config": query(["scontrol", "show", "config"]),
        }
        _need(asked, ("scontrol show partition", "sinfo"), "Slurm")
        server = sf.parse_slurm_config(asked["scontrol show config"] or "")
        queues = sf.parse_scontrol_partitions(asked["scontrol show partition"] or "")
        nodes = sf.parse_sinfo_nodes(asked["sinfo"] or "")
    else:
        raise SpecError(f"scheduler {scheduler!r} is not pbs or slurm; pass --scheduler pbs|slurm")
    if not queues:
        raise SpecError(f"the {scheduler} cluster lists no queue that runs jobs; ask its admins")
    answered = tuple(k for k, v in asked.items() if v is not None)
    return ClusterFacts(scheduler, tuple(queues), tuple(nodes), server, answered)


def _need(asked: dict[str, str | None], names: Sequence[str], what: str) -> None:
    missing = [n for n in names if asked[n] is None]
    if missing:
        raise SpecError(
            f"{', '.join(missing)} gave no answer (not on PATH, or it failed); run site init "
            f"on a login node of the {what} cluster, where these commands work"
        )


def _q(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text)


def _default_queue(facts: ClusterFacts) -> str:
    names = [q.name for q in facts.queues]
    chosen = facts.server.default_queue or next((q.name for q in facts.queues if q.default), "")
    return chosen if chosen in names else names[0]


def _queue_lines(facts: ClusterFacts) -> list[str]:
    most_nodes = len(facts.nodes) or 1
    lines: list[str] = []
    for q in facts.queues:
        lines.append(f"[queues.{_q(q.name)}]")
        if not q.open:
            lines.append("# the scheduler says this queue does not take jobs now")
        lines.append(f"min_nodes = {q.min_nodes}")
        lines.append(f"max_nodes = {q.max_nodes or most_nodes}")
        if q.min_walltime:
            lines.append(f"# the server refuses walltimes under {q.min_walltime} here")
        if q.max_walltime is None:
            lines.append("# the scheduler sets no walltime limit here")
        lines.append(f"max_walltime = {_q(q.max_walltime or NO_LIMIT)}")
    return lines


def _rule_lines(facts: ClusterFacts) -> list[str]:
    """queue_rules from max_queued and max_array_size (an array counts as N queued jobs)."""
    server = facts.server
    lines = ["[queue_rules]"]
    if server.max_array_size:
        lines.append(f"max_array_size = {server.max_array_size}  # the server's own")
    for q in facts.queues:
        per_user = q.max_queued_per_user or server.max_queued_per_user
        arrays = q.max_array_size
        if per_user and per_user > 1:
            arrays = min(arrays or server.max_array_size or per_user, per_user)
        rules = []
        if not q.enabled:
            rules.append("enabled = false  # the scheduler says it takes no new jobs")
        if per_user:
            rules.append(f"max_jobs_per_user = {per_user}  # max_queued [u:PBS_GENERIC={per_user}]")
        if arrays and per_user != 1:
            rules.append(f"max_array_size = {arrays}")
        if rules:
            lines += [f"[queue_rules.{_q(q.name)}]", *rules]
    return lines


_HEAD = """\
# Site record {name!r}, written by `hpcprof-kit site init --scheduler {scheduler}` from what
# the cluster said:
#   {asked}
# The queues, limits, nodes and rules are the scheduler's; run site init again (to a new name)
# when they change. EDIT the lines marked EDIT: what no scheduler can tell (modules, the Python
# environment, the MPI launcher). Then check it: hpcprof-kit render --system {name}
"""

_LAUNCHERS = {
    "pbs": [
        "# EDIT: the MPI launcher. hydra: MPICH's mpiexec (finds the nodes in $PBS_NODEFILE);",
        '# pals: HPE Cray PALS mpiexec (then launcher_args = ["--pmi=pmix"] where the site says).',
        'launcher = "hydra"',
    ],
    "slurm": [
        "# EDIT: srun starts the ranks; --mpi= names the PMI your MPI was built with",
        "# (srun --mpi=list shows those this cluster has).",
        'launcher = "srun"',
        'launcher_args = ["--mpi=pmi2"]',
    ],
}


def nodes_text(count: int) -> str:
    """``count`` nodes in words.

    >>> nodes_text(1), nodes_text(4)
    ('1 node', '4 nodes')
    """
    return f"{count} node{'' if count == 1 else 's'}"


def record_text(facts: ClusterFacts, name: str) -> str:
    """The record's TOML text (pure)."""
    cores = min((n.cores for n in facts.nodes if n.cores), default=0)
    gpus = max((n.gpus for n in facts.nodes), default=0)
    asked = ", ".join(facts.asked) or "no command"
    lines = [
        _HEAD.format(name=name, scheduler=facts.scheduler, asked=asked).rstrip("\n"),
        f"name = {_q(name)}",
        f"title = {_q(f'{name} ({nodes_text(len(facts.nodes))}, {facts.scheduler})')}",
        f'scheduler = "{facts.scheduler}"',
        *_LAUNCHERS[facts.scheduler],
        'device_type = "auto"',
        'backend = "auto"',
        'profiler_activity = "auto"',
        'hsn_suffix = ""',
        "# EDIT: true where the site charges every job to a project (-A / --account)",
        "account_required = false",
        f"default_queue = {_q(_default_queue(facts))}",
    ]
    if "filesystems" in facts.server.resources:
        lines += [
            "# The server defines a 'filesystems' resource; name yours here if jobs need it,",
            "# EDIT: and list the names it takes (the server cannot say), e.g.",
            '# valid_filesystems = ["home", "scratch"]',
        ]
    elif facts.scheduler == "pbs":
        lines += ["# The server defines no 'filesystems' resource: qsub refuses -l filesystems",
                  "valid_filesystems = []"]  # fmt: skip
    lines += ['default_filesystems = ""', 'default_binding = "none"', "vendor_tracers = []"]
    if facts.scheduler == "pbs" and cores:
        lines += [
            f"# Each node asked for whole: pbsnodes reports {cores} cores on the smallest node",
            f'pbs_select_suffix = ":ncpus={cores}"',
        ]
    lines += [
        "# EDIT: the Python environment a batch job activates ($HOME is expanded by the job)",
        '# default_venv = "$HOME/venvs/hpcprof-kit"',
        "",
        "# What the scheduler said of the nodes and the server (for you; the kit reads the",
        "# queues and queue_rules below).",
        "[cluster]",
        f"nodes = {len(facts.nodes)}",
        f"cores_per_node = {cores}",
        f"gpus_per_node = {gpus}",
        f"resources = {json.dumps(list(facts.server.resources))}",
    ]
    if facts.server.job_history is not None:
        lines.append(f"job_history = {str(facts.server.job_history).lower()}")
    lines += [
        "",
        "# The node's shape (sockets, NUMA, devices) is read on the node at run time.",
        "[topology]",
        "sockets = 0\ncores_per_socket = 0\nthreads_per_core = 0\nsibling_offset = 0",
        'reserved_cores = []\nreserved_note = ""',
        'gpus = 0\ntiles_per_gpu = 1\ndevice_hierarchy = ""',
        'device_mask_var = "CUDA_VISIBLE_DEVICES"\nmemory_per_device_gib = 0',
        "numa = []\ndevices = []",
        "",
        *_queue_lines(facts),
        "",
        *_rule_lines(facts),
        "",
        "[environment]",
        '# EDIT: the lines a job runs first, e.g. ["module load python/3.11"]',
        "setup = []",
        "[environment.vars]",
        "",
        "[bindings.none]",
        'title = "no binding: the OS places and moves the ranks (the default)"',
        'origin = "the launcher\'s default"',
        'device = "local_rank"',
        'known_problems = ["unbound"]',
        "ranks = [2]",
        'cpu_bind = "none"',
    ]
    return "\n".join(lines) + "\n"


def records_folder(out: str | None) -> Path:
    """Where the record goes: ``out``, else ``$HPCPROF_SYSTEMS_DIR``; SpecError without either."""
    folder = out or os.environ.get("HPCPROF_SYSTEMS_DIR")
    if not folder:
        raise SpecError(
            "no folder for the record: pass --out DIR, or set HPCPROF_SYSTEMS_DIR to the "
            "folder your site records live in (then --system NAME finds it)"
        )
    return Path(folder).resolve()


def write_record(facts: ClusterFacts, name: str, folder: Path) -> Path:
    """Write ``folder/name.toml``; never over a record that exists or a built-in name."""
    if not _SYSTEM_NAME.match(name):
        raise SpecError(f"name {name!r} is not a record name; use letters, digits, '.', '_', '-'")
    path = folder / f"{name}.toml"
    if path.exists():
        raise SpecError(
            f"{path} already exists; site init never overwrites a record: pass another "
            "--name, or move that file away first"
        )
    if name in system_names():  # a second record of that name would hide one of the two
        raise SpecError(
            f"a system named {name!r} already exists (hpcprof-kit knows it); pass another --name"
        )
    folder.mkdir(parents=True, exist_ok=True)
    with open(path, "x", encoding="utf-8") as fh:  # "x": a file made meanwhile is not replaced
        fh.write(record_text(facts, name))
    return path
