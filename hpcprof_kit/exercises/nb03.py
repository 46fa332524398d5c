"""Notebook 03 exercises: complete a hand-written DDP rendezvous (run on every rank), then say
which rank a process is whose launchers disagree."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from hpcprof_kit.exercises import feedback

# What the learner's my_ddp.py must call: the rendezvous and DDP as the ATPESC guide and ezpz write them.
RENDEZVOUS_CALLS = (
    "bcast",
    "init_process_group",
    "DistributedDataParallel",
    "destroy_process_group",
)

# Hydra's mpiexec started inside a Slurm job: one proxy per node, so SLURM_PROCID is 0 everywhere.
PUZZLE_ENV: dict[str, str] = {
    "SLURM_JOB_ID": "4242", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "2",
    "SLURM_NNODES": "2", "PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1",
    "MPI_LOCALNRANKS": "2",
}  # fmt: skip


def check_rank(rank: int | None, local_rank: int | None) -> bool:
    """Check the learner's reading of ``PUZZLE_ENV`` against ``ranks_from_env``.

    >>> check_rank(None, None)
    Not yet. Hint: fill in rank and local_rank (two ints) as you read them from PUZZLE_ENV.
    False
    """
    from hpcprof_kit.ranks import ranks_from_env

    info = ranks_from_env(PUZZLE_ENV, use_mpi=False)
    if rank is None or local_rank is None:
        return feedback(False, hint="fill in rank and local_rank (two ints) as you read them "
                        "from PUZZLE_ENV.")  # fmt: skip
    return feedback(
        (rank, local_rank) == (info.rank, info.local_rank),
        hint="the variables of PUZZLE_ENV disagree: which launcher started this process? "
        "Find each of them in the reading order of section 1 (ranks.RANK_VARS, "
        "ranks.LOCAL_RANK_VARS); the first one set wins, and section 1 says why.",
        well_done=f"Correct - rank {info.rank} (PMI_RANK), local rank {info.local_rank} "
        "(MPI_LOCALRANKID); SLURM_PROCID describes Hydra's proxy, not the rank.",
    )


def _called(source: str) -> set[str]:
    """The last name of every call in ``source`` (``comm.bcast(...)`` -> ``bcast``); ``DDP`` is
    read through its import alias."""
    tree = ast.parse(source)
    alias = {a.asname: a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
             for a in n.names if a.asname}  # fmt: skip
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            names.add(alias.get(name, name))
    return names


def check_my_rendezvous(script: str | os.PathLike[str] = "my_ddp.py", run=None) -> bool:
    """Check the learner's ``my_ddp.py`` and its job: it shares rank 0's address with MPI's
    ``bcast``, calls ``init_process_group``, wraps the model in ``DDP`` and destroys the group;
    every rank of ``run`` printed its banner with the backend the kit picks for its device.

    >>> import tempfile, pathlib
    >>> s = pathlib.Path(tempfile.mkdtemp()) / "my_ddp.py"
    >>> _ = s.write_text("import torch.distributed as dist\\ndist.init_process_group()\\n")
    >>> check_my_rendezvous(s)
    Not yet. Hint: my_ddp.py never calls bcast, DistributedDataParallel, destroy_process_group.
    False
    """
    from hpcprof_kit.dist import choose_backend, parse_banners

    try:
        called = _called(Path(script).read_text())
    except (OSError, SyntaxError) as exc:
        return feedback(False, hint=f"{script} does not read as Python ({exc}); run its cell again")
    missing = [c for c in RENDEZVOUS_CALLS if c not in called]
    if missing:
        return feedback(False, hint=f"{Path(script).name} never calls {', '.join(missing)}.")
    if run is None:
        return feedback(True, hint="", well_done="Correct - the rendezvous and DDP are all there.")
    run_dir = Path(run.run_dir if hasattr(run, "run_dir") else os.fspath(run))
    spec = json.loads((run_dir / "spec.json").read_text())
    world = int(spec.get("nodes") or 1) * int(spec.get("ranks_per_node") or 1)
    banners = parse_banners((run_dir / "stdout").read_text())
    ranks = sorted(int(b["rank"]) for b in banners)
    if ranks != list(range(world)):
        return feedback(False, hint=f"ranks {ranks} of {world} printed their line: did the job "
                        "complete? wait_for(job) says why not.")  # fmt: skip
    wrong = [b for b in banners if b["backend"] != choose_backend(str(b["device"]).split(":")[0])]
    return feedback(
        not wrong,
        hint="fill the blank: the backend follows the device (xccl on XPU, nccl on CUDA, gloo on "
        f"CPU); rank {wrong[0]['rank'] if wrong else ''} printed backend={wrong[0]['backend'] if wrong else ''}.",
        well_done=f"Correct - {world} ranks met at rank 0's address and ran DDP over "
        f"{banners[0]['backend']}.",
    )


# The job each #PBS header asks for, in words (the notebook's task): the values are the
# learner's to write in PBS's own syntax, and qsub's rules are the site's record.
PBS_TASK = {"nodes": 2, "minutes": 30, "queue": "debug"}
# The file system each site's job reads besides home (the notebook names it in words).
PROJECT_FS = {"aurora": "flare", "polaris": "eagle"}
_PLACEHOLDER = "YOUR_PROJECT"


def _site_refusal(text: str, system: str) -> str | None:
    """What qsub on ``system`` answers for the header ``text`` (its rules from the site's
    record, by the rehearsal's own check), or None where it accepts it."""
    import tempfile

    from hpcprof_kit.rehearsal.pbs_request import Refused, check_request, parse_directives
    from hpcprof_kit.rehearsal.twin import Twin
    from hpcprof_kit.systems import load_system

    req = None
    try:
        req = parse_directives(text)
        with tempfile.TemporaryDirectory() as root:  # a server with no job queued yet
            check_request(Twin(Path(root), {"reservations": {}}), load_system(system), req)
    except Refused as exc:
        return str(exc) + _limits_seen(req, system, str(exc))
    return None


def _limits_seen(req, system: str, refusal: str) -> str:
    """For qsub's "violates ... limits": which of the queue's limits the request broke."""
    from hpcprof_kit.rehearsal.pbs_request import walltime_seconds
    from hpcprof_kit.systems import load_system

    if req is None or "violates" not in refusal:
        return ""
    record = load_system(system)
    queue = record.queues.get(req.queue or record.default_queue)
    seen = []
    if queue and not queue.min_nodes <= (req.nodes or 1) <= queue.max_nodes:
        seen.append(f"{req.nodes or 1} nodes; queue {req.queue or record.default_queue} takes "
                    f"{queue.min_nodes} to {queue.max_nodes}")  # fmt: skip
    if (
        queue
        and req.walltime
        and walltime_seconds(req.walltime) > walltime_seconds(queue.max_walltime)
    ):
        seen.append(f"walltime {req.walltime}; the queue's longest is {queue.max_walltime}")
    suffix = str(record.extra.get("pbs_select_suffix", ""))
    if suffix and suffix not in req.select:
        seen.append(f"select={req.select} names no system; on {system} select's chunk "
                    "names the machine too (a resource after ':')")  # fmt: skip
    return f" ({'; '.join(seen)})" if seen else ""


def _header_gaps(text: str, system: str) -> list[str]:
    """What the header misses of the task, once qsub accepts it (one phrase per gap)."""
    from hpcprof_kit.rehearsal.pbs_request import parse_directives, walltime_seconds
    from hpcprof_kit.systems import load_system

    req, record = parse_directives(text), load_system(system)
    gaps = []
    if req.nodes != PBS_TASK["nodes"]:
        gaps.append(f"the job asks for {req.nodes or 1} node(s), the task for {PBS_TASK['nodes']}")
    if walltime_seconds(req.walltime) != PBS_TASK["minutes"] * 60:
        gaps.append(f"walltime {req.walltime} is not the task's {PBS_TASK['minutes']} minutes")
    if req.queue != PBS_TASK["queue"]:
        gaps.append(f"the queue is {req.queue or 'not named (-q)'}, the task's is "
                    f"{PBS_TASK['queue']}")  # fmt: skip
    wanted = {"home", PROJECT_FS[system]}
    if not wanted <= set(req.filesystems.split(":")):
        gaps.append(f"filesystems={req.filesystems} leaves out one the job reads "
                    f"({' and '.join(sorted(wanted))}, ':' between them)")  # fmt: skip
    place = str(record.extra.get("pbs_place", ""))
    if place and req.place.split(":")[0] != place:
        gaps.append(f"place={req.place or '(none)'}: each chunk on a node of its own, as the "
                    "site's scripts ask, is spelled differently")  # fmt: skip
    if req.account in ("", _PLACEHOLDER):
        gaps.append("-A still names no project of yours")
    return gaps


def check_pbs_header(script: str | os.PathLike[str], system: str) -> bool:
    """Check the ``#PBS`` header of ``script`` for ``system`` ("aurora" or "polaris"): qsub on
    the site accepts it (the rehearsal's parse_directives and check_request, with the site's
    record) and it asks for the task's job (PBS_TASK, on the site's project file system).

    >>> import tempfile, pathlib
    >>> s = pathlib.Path(tempfile.mkdtemp()) / "job.pbs"
    >>> _ = s.write_text("#!/bin/bash -l\\n#PBS -A P\\n#PBS -l select=?\\n")
    >>> check_pbs_header(s, "aurora")
    Not yet. Hint: qsub on aurora answers: qsub: Illegal attribute or resource value Resource_List.select
    False
    """
    path = Path(script)
    try:
        text = path.read_text()
    except OSError as exc:
        return feedback(False, hint=f"{path} cannot be read ({exc}): run its cell again")
    if "#PBS" not in text:
        return feedback(False, hint=f"{path.name} has no #PBS line: qsub reads directives from "
                        "'#PBS' lines before the first command.")  # fmt: skip
    refusal = _site_refusal(text, system)
    if refusal:
        return feedback(False, hint=f"qsub on {system} answers: {refusal}")
    gaps = _header_gaps(text, system)
    return feedback(
        not gaps,
        hint=f"qsub on {system} would take it, but " + "; ".join(gaps) + ".",
        well_done=f"Correct - qsub on {system} accepts {path.name}, and it asks for the task's "
        "job; the kit renders the rest of the script (JobSpec(...).render()).",
    )
