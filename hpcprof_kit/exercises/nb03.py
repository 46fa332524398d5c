"""Notebook 03 exercise: which rank is a process whose launchers disagree?"""

from __future__ import annotations

from hpcprof_kit.exercises import feedback

# What would give the answer away above the check cell (tests/test_exercises_hidden.py): the
# puzzle read by the kit's own reader, or the answer's words.
HIDDEN = {
    "check_rank": {
        "text": [r"rank 3\b[^\n]*local rank 1\b", r"rank=3\b[^\n]*local_rank=1\b"],
        "code": ["ranks_from_env(PUZZLE_ENV"],
        "answer": "notebook_answer",
    }
}

# Hydra's mpiexec started inside a Slurm job: one proxy per node, so SLURM_PROCID is 0 everywhere.
PUZZLE_ENV: dict[str, str] = {
    "SLURM_JOB_ID": "4242", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "2",
    "SLURM_NNODES": "2", "PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1",
    "MPI_LOCALNRANKS": "2",
}  # fmt: skip


def notebook_answer() -> list[int]:
    """The puzzle's rank and local rank, as the kit reads them (the answer key's).

    >>> notebook_answer()
    [3, 1]
    """
    from hpcprof_kit.ranks import ranks_from_env

    info = ranks_from_env(PUZZLE_ENV, use_mpi=False)
    return [info.rank, info.local_rank]


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
