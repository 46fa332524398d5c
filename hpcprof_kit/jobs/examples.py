"""The runnable examples a job can start, and the grid of ready scripts kept in ``jobs/``.

>>> from hpcprof_kit.jobs.examples import EXAMPLES
>>> EXAMPLES["train"].command
('python3', '-m', 'hpcprof_kit.apps.train')
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    name: str
    module: str
    about: str
    profile_flags: tuple[str, ...] = ("--profile",)
    capture_flag: str | None = "--capture-steps"  # wraps chosen steps in capture(); None: none

    @property
    def command(self) -> tuple[str, ...]:
        # ``python3`` rather than a path: scripts stay portable; the local backend puts the
        # kit's own interpreter first on PATH when it starts a job.
        return ("python3", "-m", self.module)


EXAMPLES: dict[str, Example] = {
    "train": Example("train", "hpcprof_kit.apps.train", "DDP training of a small Transformer"),
    "seqpar": Example("seqpar", "hpcprof_kit.apps.seqpar", "sequence-parallel matmuls"),
    "affinity": Example(
        "affinity",
        "hpcprof_kit.apps.affinity_report",
        "which CPUs and device each rank got",
        capture_flag=None,
    ),
    "pathologies": Example(
        "pathologies",
        "hpcprof_kit.apps.pathologies",
        "a DDP loop with the problems you ask for (--problem), or none",
        capture_flag=None,  # it records with --profile only
    ),
    "analyze": Example(
        "analyze",
        "hpcprof_kit.apps.analyze",
        "analysis of a run's traces as an MPI job",
        profile_flags=(),  # it reads traces, it makes none: profile=True is refused
        capture_flag=None,
    ),
}

# The scripts in jobs/<system>/<variant>.sh: variant name -> JobSpec fields.
# "train-<tracer>" is added per system for each vendor tracer it lists.
VARIANTS: dict[str, dict[str, object]] = {
    "train": {"example": "train"},
    "train-profile": {"example": "train", "profile": True},
    # The ATPESC hands-on's other two scripts: the same DDP model under torch.compile.
    "train-compile": {"example": "train", "args": ("--compile",)},
    "train-compile-profile": {"example": "train", "profile": True, "args": ("--compile",)},
    "seqpar": {"example": "seqpar"},
    "affinity": {"example": "affinity"},
}

# Ready scripts of one system only are its record's [ready_scripts.NAME] tables (JobSpec
# fields). Every system record gets a folder in jobs/; the placeholder account they carry:
PLACEHOLDER_ACCOUNT = "YOUR_PROJECT"
