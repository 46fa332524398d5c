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


# The decision exercise: a Polaris job, the ranks filling nodes in order; per question, what a
# set of traced ranks must let you compare, and how many reports the budget allows.
TRACE_JOB = {"world": 16, "ranks_per_node": 4}
TRACE_QUESTIONS = {
    "which node is slow": {"budget": 4, "needs": "every node"},
    "cross-node all-reduce wait": {"budget": 2, "needs": "two nodes"},
}


def _unmet(question: str, ranks) -> list[str]:
    """What ``ranks`` misses of ``question``'s constraints, one phrase each (empty: it meets
    them). Any set that meets them is right."""
    world, per_node = TRACE_JOB["world"], TRACE_JOB["ranks_per_node"]
    rule = TRACE_QUESTIONS[question]
    if ranks is None:
        return ["no ranks yet"]
    try:
        chosen = sorted({int(r) for r in ranks})
    except (TypeError, ValueError):
        return [f"{ranks!r} is not a list of rank numbers"]
    unmet = []
    outside = [r for r in chosen if not 0 <= r < world]
    if outside:
        unmet.append(f"ranks {outside} are not in this {world}-rank job")
    if len(chosen) > rule["budget"]:
        unmet.append(f"{len(chosen)} reports, over the budget of {rule['budget']}")
    nodes = {r // per_node for r in chosen if 0 <= r < world}
    if rule["needs"] == "every node" and len(nodes) < world // per_node:
        unmet.append(f"{len(nodes)} of the {world // per_node} nodes traced: a node with no "
                     "traced rank cannot be compared")  # fmt: skip
    if rule["needs"] == "two nodes" and len(nodes) < 2:
        unmet.append("all on one node: its ranks meet over the node's own links, not the "
                     "network between nodes")  # fmt: skip
    if not chosen:
        unmet.append("no rank traced")
    return unmet


def check_ranks_to_trace(choice: dict | None, profrank=None, rankcutoff=None) -> bool:
    """Check the learner's traced ranks for each question of ``TRACE_QUESTIONS`` (any set that
    meets its constraints is right), and the wrapper's ``PROFRANK``/``RANKCUTOFF`` that trace
    a set meeting the first question's.

    >>> check_ranks_to_trace(dict.fromkeys(TRACE_QUESTIONS, [0, 1, 2, 3, 4]))  # doctest: +ELLIPSIS
    Not yet. Hint: which node is slow: 5 reports, over the budget of 4; 2 of the 4 nodes traced: ...
    False
    """
    from hpcprof_kit.tracer_ranks import traced_ranks

    choice = choice or {}
    problems = [f"{q}: {'; '.join(u)}" for q in TRACE_QUESTIONS
                if (u := _unmet(q, choice.get(q)))]  # fmt: skip
    first = next(iter(TRACE_QUESTIONS))
    if profrank is None or rankcutoff is None:
        problems.append("PROFRANK and RANKCUTOFF: not set yet")
    else:
        wrapped = traced_ranks(TRACE_JOB["world"], TRACE_JOB["ranks_per_node"], int(profrank),
                               int(rankcutoff))  # fmt: skip
        unmet = _unmet(first, wrapped)
        if unmet:
            problems.append(f"PROFRANK={profrank} RANKCUTOFF={rankcutoff} traces {wrapped}, which "
                            f"does not answer '{first}': {'; '.join(unmet)}")  # fmt: skip
    return feedback(
        not problems,
        hint="; ".join(problems) + ".",
        well_done="Correct - each set answers its question within its budget, and the wrapper's "
        "two variables trace a set for the first.",
    )
