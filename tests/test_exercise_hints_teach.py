"""Hints teach without stating the answer on Run All: notebook 07's delivered default printed
the fix ("bind it to CPUs in 24-31,56-63") and the rule ("GPU0 sits next to the LAST NUMA
domain"); notebook 01's hint on its delivered call said "Count GPUs x tiles" under the
printed "6 GPUs x 2 tiles"; notebook 03's puzzle hint stated the reading order that answers it
(tested in tests/test_exercise_nb03_pbs_header.py)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from hpcprof_kit.exercises.nb07 import check_polaris_list
from hpcprof_kit.validate.answers import answer_polaris_list

REPO = Path(__file__).resolve().parents[1]
NB07 = REPO / "notebooks" / "07_affinity_exercise.ipynb"
# what states the answer: a NUMA domain's CPUs, the rule, the list itself
ANSWERS = (r"24-31", r"0-7\b", r"\bLAST NUMA\b", r"bind it to", re.escape(answer_polaris_list()))


def _delivered_list() -> object:
    nb = nbformat.read(NB07, as_version=4)
    cell = next(c.source for c in nb.cells if "check_polaris_list(my_list)" in c.source)
    line = next(ln for ln in cell.splitlines() if ln.startswith("my_list ="))
    scope: dict = {}
    exec(line, scope)  # noqa: S102 - the notebook's own line
    return scope["my_list"]


def test_nb07_hint_on_the_delivered_default_states_no_answer(capsys):
    assert not check_polaris_list(_delivered_list())
    printed = capsys.readouterr().out
    assert printed.startswith("Not yet. Hint: write your list")
    assert not [p for p in ANSWERS if re.search(p, printed)]


@pytest.mark.parametrize("wrong", ["list:0-7:8-15:16-23:24-31", "list:0-1:8-9:16-17:24-25"])
def test_nb07_hint_on_a_wrong_list_says_what_it_saw_not_the_fix(capsys, wrong):
    assert not check_polaris_list(wrong)
    printed = capsys.readouterr().out
    assert "rank 0 runs in NUMA domain(s) [0] but drives GPU0, which sits next to NUMA 3" in printed
    assert "The table of section 2 says" in printed
    assert not [p for p in ANSWERS[2:] if re.search(p, printed)]
    assert "24-31" not in printed


def test_nb07_right_list_still_accepted(capsys):
    assert check_polaris_list(answer_polaris_list())
    assert capsys.readouterr().out.startswith("Correct")


NB01 = REPO / "notebooks" / "01_device_discovery.ipynb"
# the operations that answer notebook 01's counts, and the answers themselves
NB01_ANSWERS = (r"GPUs?\s*x\s*tiles", r"\bx\s*8\b", r"\b8 EUs\b", r"\b12\b", r"\b448\b", r"\b6\b")


def test_nb01_hint_on_the_delivered_call_states_no_operation(capsys):
    from hpcprof_kit.exercises.nb01 import check_device_counts

    nb = nbformat.read(NB01, as_version=4)
    cell = next(c.source for c in nb.cells if "check_device_counts(" in c.source)
    call = next(ln for ln in cell.splitlines() if ln.startswith("check_device_counts("))
    assert call == "check_device_counts(flat=None, composite=None, compute_units=None)"
    assert not check_device_counts(flat=None, composite=None, compute_units=None)
    printed = capsys.readouterr().out
    assert printed.startswith("Not yet. Hint: fill in flat, composite and compute_units")
    assert not [p for p in NB01_ANSWERS if re.search(p, printed)]


@pytest.mark.parametrize("wrong", [(6, 12, 56), (12, 12, 400), (24, 2, 56)])
def test_nb01_hint_on_a_wrong_answer_asks_without_the_operation(capsys, wrong):
    from hpcprof_kit.exercises.nb01 import check_device_counts

    assert not check_device_counts(*wrong)
    printed = capsys.readouterr().out
    assert "Count GPUs x tiles" not in printed
    assert not [p for p in NB01_ANSWERS if re.search(p, printed)]
