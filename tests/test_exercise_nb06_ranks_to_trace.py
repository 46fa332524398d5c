"""Notebook 06's exercise makes the learner decide which ranks to trace for a question and a
budget, and the check takes any set that meets the question's needs. Before, the exercise was
one formula with its helper imported above, and "What you learned" claimed "a 24-rank job
yields two reports" against section 3's printed ``[0]``."""

from __future__ import annotations

import itertools
from pathlib import Path

import nbformat
import pytest

from hpcprof_kit.exercises.nb06 import TRACE_QUESTIONS, check_ranks_to_trace
from hpcprof_kit.tracer_ranks import traced_ranks
from hpcprof_kit.validate.answers import answer_ranks_to_trace

REPO = Path(__file__).resolve().parents[1]
NB06 = REPO / "notebooks" / "06_vendor_profilers.ipynb"
NODES, SLOW = "which node is slow", "cross-node all-reduce wait"


def test_ranks_to_trace_exercise_ships_placeholders_in_notebook_06():
    nb = nbformat.read(NB06, as_version=4)
    cell = next(c.source for c in nb.cells if "check_ranks_to_trace(" in c.source)
    assert f'"{NODES}": None' in cell and f'"{SLOW}": None' in cell
    assert "my_profrank, my_rankcutoff = None, None" in cell


def test_ranks_to_trace_as_shipped_is_not_yet(capsys):
    assert not check_ranks_to_trace(dict.fromkeys(TRACE_QUESTIONS), None, None)
    assert capsys.readouterr().out.startswith(f"Not yet. Hint: {NODES}: no ranks yet")


def test_ranks_to_trace_accepts_every_set_that_meets_the_needs(capsys):
    """Every one-rank-per-node choice (256 of them) and every pair across nodes are right."""
    per_node = [range(n * 4, n * 4 + 4) for n in range(4)]
    pairs = [p for p in itertools.combinations(range(16), 2) if p[0] // 4 != p[1] // 4]
    for nodes, pair in zip(itertools.product(*per_node), itertools.cycle(pairs)):
        assert check_ranks_to_trace({NODES: list(nodes), SLOW: list(pair)}, 1, 16)
    for pair in pairs:
        assert check_ranks_to_trace({NODES: [3, 7, 11, 15], SLOW: list(pair)}, 3, 16)
    capsys.readouterr()


@pytest.mark.parametrize(
    ("choice", "wrapper", "says"),
    [
        ({NODES: [0, 1, 2, 3, 4]}, (0, 16), "5 reports, over the budget of 4"),
        ({NODES: [0, 4, 8]}, (0, 16), "3 of the 4 nodes traced"),
        ({SLOW: [0, 1]}, (0, 16), "all on one node"),
        ({SLOW: [0, 4, 8]}, (0, 16), "3 reports, over the budget of 2"),
        ({NODES: [0, 4, 8, 16]}, (0, 16), "ranks [16] are not in this 16-rank job"),
        ({}, (0, 12), "PROFRANK=0 RANKCUTOFF=12 traces [0, 4, 8]"),
        ({}, (2, 14), "PROFRANK=2 RANKCUTOFF=14 traces [2, 6, 10]"),
    ],
)
def test_ranks_to_trace_says_which_need_a_set_misses(capsys, choice, wrapper, says):
    right = answer_ranks_to_trace()
    full = {NODES: right[NODES], SLOW: right[SLOW], **choice}
    assert not check_ranks_to_trace(full, *wrapper)
    assert says in capsys.readouterr().out


def test_nb06_what_you_learned_claims_what_section_3_prints():
    nb = nbformat.read(NB06, as_version=4)
    learned = nb.cells[-1].source
    assert "two reports" not in learned and "yields" not in learned
    # section 3 prints the traced ranks for its parameters: one rank on Aurora, not two
    params: dict = {}
    exec(nb.cells[1].source, params)  # noqa: S102 - the notebook's parameters cell
    assert traced_ranks(24, 12, params["profrank"], params["rankcutoff"]) == [0]
