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

    >>> check_rank(0, 0)
    Not yet. Hint: Under Slurm, Hydra gives every rank SLURM_PROCID=0; the PMI variables come first.
    False
    """
    from hpcprof_kit.ranks import ranks_from_env

    info = ranks_from_env(PUZZLE_ENV, use_mpi=False)
    return feedback(
        (rank, local_rank) == (info.rank, info.local_rank),
        hint="Under Slurm, Hydra gives every rank SLURM_PROCID=0; the PMI variables come first.",
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
