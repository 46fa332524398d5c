"""Notebook 03 has the learner type the ``#PBS`` header of an Aurora and a Polaris job
(``-A``, ``-q``, ``select``, ``place``, ``walltime``, ``filesystems``), checked by qsub's
rules as the site rehearsal applies them (``parse_directives``, ``check_request``, the site's
record). Before, ``#PBS`` appeared in no notebook. Also: 03's puzzle hint no longer states the
rule that answers it."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from hpcprof_kit.exercises.nb03 import check_pbs_header, check_rank
from hpcprof_kit.validate.answers import HIDDEN, answer_pbs_headers

REPO = Path(__file__).resolve().parents[1]
NB03 = REPO / "notebooks" / "03_ddp_with_mpi.ipynb"
SITES = ("aurora", "polaris")


def _header_cell(system: str) -> str:
    nb = nbformat.read(NB03, as_version=4)
    return next(c.source for c in nb.cells if c.source.startswith(f"%%writefile my_{system}.pbs"))


def _script(tmp_path: Path, text: str, name: str = "job.pbs") -> Path:
    path = tmp_path / name
    path.write_text(text if text.startswith("#!") else "#!/bin/bash -l\n" + text)
    return path


def test_pbs_header_is_typed_in_notebook_03_and_its_check_is_called():
    nb = nbformat.read(NB03, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert all(any(s.startswith(f"%%writefile my_{site}.pbs") for s in code) for site in SITES)
    check = next(s for s in code if "check_pbs_header(" in s)
    assert 'check_pbs_header("my_aurora.pbs", "aurora")' in check
    assert 'check_pbs_header("my_polaris.pbs", "polaris")' in check


@pytest.mark.parametrize("system", SITES)
def test_pbs_header_as_shipped_is_not_yet_and_says_what_qsub_answers(tmp_path, capsys, system):
    shipped = _header_cell(system).split("\n", 1)[1]
    assert not check_pbs_header(_script(tmp_path, shipped), system)
    printed = capsys.readouterr().out
    assert printed.startswith(f"Not yet. Hint: qsub on {system} answers: qsub: ")
    # the shipped cell shows none of the directives that answer the task
    for pattern in HIDDEN["nb03"]["check_pbs_header"]["text"]:
        assert not __import__("re").search(pattern, shipped), pattern


@pytest.mark.parametrize("system", SITES)
def test_pbs_header_right_answer_accepted_in_each_spelling(tmp_path, capsys, system):
    key = answer_pbs_headers()[system]
    assert check_pbs_header(_script(tmp_path, key), system)
    fs = "eagle" if system == "polaris" else "flare"
    chunk = ":system=polaris" if system == "polaris" else ""
    other = (f"#PBS -A proj -q debug\n#PBS -l select=2{chunk},place=scatter:exclhost\n"
             f"#PBS -l walltime=0:30:00 -l filesystems={fs}:home\nmodule load x\n")  # fmt: skip
    assert check_pbs_header(_script(tmp_path, other, "other.pbs"), system)
    assert capsys.readouterr().out.count("Correct - qsub on " + system) == 2


@pytest.mark.parametrize(
    ("system", "edit", "says"),
    [
        ("aurora", ("#PBS -A MyProject\n", ""), "Account_Name is required"),
        ("aurora", ("select=2", "select=3"), "3 nodes; queue debug takes 1 to 2"),
        ("aurora", ("walltime=00:30:00", "walltime=02:00:00"), "the queue's longest is 01:00:00"),
        ("aurora", ("#PBS -l filesystems=home:flare\n", ""), "filesystems is required"),
        ("aurora", ("home:flare", "home"), "leaves out one the job reads"),
        ("aurora", ("#PBS -l place=scatter\n", ""), "place=(none)"),
        ("aurora", ("#PBS -q debug\n", ""), "the queue is not named (-q)"),
        ("aurora", ("walltime=00:30:00", "walltime=00:20:00"), "not the task's 30 minutes"),
        ("polaris", (":system=polaris", ""), "names no system"),
        ("polaris", ("home:eagle", "home:flare"), "leaves out one the job reads"),
    ],
)
def test_pbs_header_wrong_answer_names_what_qsub_or_the_task_misses(tmp_path, capsys, system,
                                                                     edit, says):  # fmt: skip
    text = answer_pbs_headers()[system].replace(*edit)
    assert not check_pbs_header(_script(tmp_path, text), system)
    printed = capsys.readouterr().out
    assert printed.startswith("Not yet. Hint: ") and says in printed, printed


def test_pbs_header_hints_never_print_the_answer(tmp_path, capsys):
    import re

    for system in SITES:
        for text in (
            "#PBS -A p\n#PBS -l select=?\n",
            "#PBS -A p -q debug -l select=9\n",
            "#PBS -A p -q debug -l select=2 -l walltime=0:30:00 -l filesystems=home\n",
        ):
            check_pbs_header(_script(tmp_path, text), system)
    printed = capsys.readouterr().out
    for pattern in HIDDEN["nb03"]["check_pbs_header"]["text"]:
        assert not re.search(pattern, printed), (pattern, printed)


def test_nb03_puzzle_hint_does_not_state_the_rule(capsys):
    assert not check_rank(0, 0)
    hint = capsys.readouterr().out
    assert hint.startswith("Not yet. Hint: ")
    # the rule that answers the puzzle: which variables win, and what Hydra sets under Slurm
    for answer in ("PMI", "come first", "SLURM_PROCID=0", "MPI_LOCALRANKID", "rank 3"):
        assert answer not in hint, answer
    assert check_rank(3, 1)
