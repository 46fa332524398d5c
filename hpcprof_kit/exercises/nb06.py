"""Notebook 06: run a tracer wrapper's rank selection for real, and the exercise's self-check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from hpcprof_kit.errors import SpecError
from hpcprof_kit.exercises import feedback

# The stand-in tracer programs (nsys/ncu/unitrace named scripts) live beside the tests.
STANDIN = Path(__file__).resolve().parents[2] / "tests" / "standin"


def rank_selection_demo(tracer: str, system: str, ranks: int = 4, ranks_per_node: int = 2,
                        profrank: int = 0, rankcutoff: int | None = None) -> list[int]:  # fmt: skip
    """Run ``ranks`` Hydra ranks through the wrapper with a stand-in tool; return the traced ranks.

    Hydra on one machine gives every rank local rank = rank, so each rank's local rank is set
    to ``rank % ranks_per_node`` (as if the ranks filled nodes in order).

    >>> rank_selection_demo("nsys", "polaris", ranks=4, ranks_per_node=2, rankcutoff=3)  # doctest: +SKIP
    [0, 2]
    """
    from hpcprof_kit.tracers import wrapper_script

    if not STANDIN.is_dir():
        raise SpecError(
            f"the stand-in tracers are not here ({STANDIN.name}/ of a source checkout); run from the kit's repository"
        )
    run_dir = Path(tempfile.mkdtemp(prefix="rank-selection-"))
    wrapper = run_dir / "tracer.sh"
    wrapper.write_text(wrapper_script(tracer, system, profrank=profrank, rankcutoff=rankcutoff))
    env = {k: v for k, v in os.environ.items() if k not in ("PROFRANK", "RANKCUTOFF")}
    env.update(HPCPROF_RUN_DIR=str(run_dir), PYTHON=sys.executable,
               PATH=f"{STANDIN}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")  # fmt: skip
    shim = f'export PALS_LOCAL_RANKID=$((PMI_RANK % {ranks_per_node})); exec bash "$0" "$@"'
    subprocess.run(["mpiexec", "-n", str(ranks), "bash", "-c", shim, str(wrapper), "true"],
                   env=env, check=True, capture_output=True, text=True, timeout=120)  # fmt: skip
    records = (run_dir / "traces" / tracer).glob("standin-*.json")
    return sorted(json.loads(p.read_text())["rank"] for p in records)


def check_traced_ranks(answer: list[int] | None) -> bool:
    """Aurora, 2 nodes x 12 ranks, PROFRANK=0, RANKCUTOFF=13: which ranks does unitrace trace?

    >>> check_traced_ranks([0, 1])
    Not yet. Hint: local rank 0 is the first rank of each node (ranks fill nodes in order); then apply the cutoff.
    False
    """
    from hpcprof_kit.tracer_ranks import traced_ranks

    right = traced_ranks(world_size=24, ranks_per_node=12, profrank=0, rankcutoff=13)
    return feedback(
        sorted(answer or []) == right,
        hint="local rank 0 is the first rank of each node (ranks fill nodes in order); then apply the cutoff.",
        well_done=f"Correct - ranks {right}: the first rank of each node, both below 13.",
    )
