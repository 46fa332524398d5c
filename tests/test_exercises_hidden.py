"""Every exercise's answer stays out of sight: predict first, then check.

A check cell is a code cell that calls a ``check_...(`` helper imported from
``hpcprof_kit.exercises.nbNN``. Anywhere in the notebook, above or below the check, nothing a
learner sees while scrolling may give its answer away:

- no markdown (the "What you learned" cell included) and no stored output of any cell may match
  the answer's text patterns, and no code comment either (a "# Solution: ..." line);
- no other cell calls the checker: a second call with the answer prints it under the learner's
  own check on "Run All" (solutions live in the instructors' answer key, docs/instructors.md);
- no code cell above the check may use a name that computes or prints the answer;
- what the cells above each check print when they run may not show the answer either (answers
  computed from the learner's own run, ``from_run``, are searched there too): searched during
  nbval's run of the notebooks (tests/nbval_hidden.py, loaded by notebooks/conftest.py), the
  one execution of each notebook in `make test` that nbval and this check share;
- no two exercises of the course have the same answer (``answer``: the same prediction twice
  teaches nothing the second time).

What gives an answer away is declared in the instructors' key (hpcprof_kit/validate/answers.py,
which no notebook imports), by exercise module and checker:

    HIDDEN = {"nbNN": {"check_x": {"text": [regex, ...], "code": [name, ...],
                                   "from_run": "func", "answer": "func"}}}

``from_run`` and ``answer`` name functions of the key. ``from_run``'s parameters are names of
the notebook's variables and it returns the regexes of the learner's own answer; ``answer``
takes no parameters and returns the answer for the notebook's own parameters. (That no name of
an exercise module gives an answer is tests/test_exercises_no_answer_in_reach.py.) A checker
without ``HIDDEN`` falls back to the notebook's solution
call: its string and list arguments become the patterns (bare numbers are too common to search
for, so such a checker must declare ``HIDDEN``).

Cost: the checks here read the files only; the executed check adds one kernel request per
notebook to nbval's run. Its tests below run nbval on a planted copy of a notebook.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from hidden_answers import KEY_MODULE, check_cells, hidden_spec, leaks, solution_patterns

from hpcprof_kit.validate import answers

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _exercises(path: Path) -> list[tuple[int, str, str]]:
    return check_cells(nbformat.read(path, as_version=4))


CASES = [
    pytest.param(path, index, name, module, id=f"{path.stem}:{index}:{name}")
    for path in NOTEBOOKS
    for index, name, module in _exercises(path)
]


def test_every_notebook_has_an_exercise_with_a_check_cell():
    assert [p.name for p in NOTEBOOKS if not _exercises(p)] == []


@pytest.mark.parametrize(("path", "index", "name", "module"), CASES)
def test_the_answer_shows_nowhere_in_the_stored_notebook(path, index, name, module):
    nb = nbformat.read(path, as_version=4)
    spec = hidden_spec(nb, name, module)
    if not (spec.get("text") or spec.get("from_run")):
        pytest.fail(
            f"{module}.{name}: nothing says what its answer looks like; declare "
            f'HIDDEN["{module.rsplit(".", 1)[-1]}"]["{name}"] = {{"text": [...], "code": [...]}} '
            f"in {KEY_MODULE}"
        )
    assert leaks(nb, index, spec) == []


def course_answers() -> list[tuple[str, str, object]]:
    """(notebook, check, answer) for every exercise whose HIDDEN names an ``answer``."""
    found = []
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for _, name, module in _exercises(path):
            func = hidden_spec(nb, name, module).get("answer")
            if func:
                found.append((path.stem, name, getattr(answers, func)()))
    return found


def repeated(answers: list[tuple[str, str, object]]) -> list[str]:
    """Each pair of exercises with the same answer (lists compared as sets of values)."""

    def key(value):
        return json.dumps(sorted(value) if isinstance(value, (list, tuple)) else value)

    seen: dict[str, tuple[str, str]] = {}
    found = []
    for stem, name, value in answers:
        first = seen.setdefault(key(value), (stem, name))
        if first != (stem, name):
            found.append(f"{stem}.{name} repeats {first[0]}.{first[1]}: both {value!r}")
    return found


def test_no_exercise_repeats_another_exercises_answer():
    answers = course_answers()
    assert len(answers) >= 8, answers  # every fixed answer is declared
    assert repeated(answers) == []


# The machinery itself, on small notebooks: a leak is found, an honest notebook passes.


def _nb(*cells):
    made = [nbformat.v4.new_markdown_cell(c[3:]) if c.startswith("md:") else
            nbformat.v4.new_code_cell(c) for c in cells]  # fmt: skip
    return nbformat.v4.new_notebook(cells=made)


def _with_output(cell, text):
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    cell.execution_count = 1
    return cell


def test_the_old_notebook_01_layout_leaks_the_device_counts():
    # Notebook 01 before predict-then-check: the hierarchy notes printed above the exercise.
    nb = _nb(
        "# NBVAL_CHECK_OUTPUT\nfor mode in ('FLAT', 'COMPOSITE'):\n"
        "    print(f'{mode:10} {device.HIERARCHY_NOTES[mode]}')",
        "from hpcprof_kit.exercises.nb01 import check_device_counts\n\n"
        "check_device_counts(flat=None, composite=None)",
    )
    _with_output(nb.cells[0], "FLAT       FLAT: every GPU tile is its own torch device "
                 "(Aurora: 6 GPUs x 2 tiles = 12 devices)\n")  # fmt: skip
    ((index, name, module),) = check_cells(nb)
    found = leaks(nb, index, hidden_spec(nb, name, module))
    assert found[0] == "cell 0 (above the check) uses HIERARCHY_NOTES, which gives the answer away"
    assert "cell 0 (above the check) stored output shows '12 devices'" in found[1]


def test_below_the_check_a_stored_output_a_solution_and_what_you_learned_leak():
    # Notebook 00 before the answers moved out: its schedule table under the check, a
    # collapsed solution cell (Run All prints the answer under the learner's check), a comment
    # and "What you learned".
    nb = _nb(
        "from hpcprof_kit.exercises.nb00 import check_recorded_steps",
        "check_recorded_steps([], job)",
        "# Solution: active records steps 2 and 3\ncheck_recorded_steps([2, 3], job)",
        "# NBVAL_CHECK_OUTPUT\nprint(table)",
        "md:## What you learned\n- here steps 2 and 3, as your trace showed",
    )
    _with_output(nb.cells[3], "   2  record   0  ProfilerStep#2\n")
    spec = {"text": [r"ProfilerStep#\d", r"steps? 2 and 3"], "code": ["format_schedule"]}
    assert leaks(nb, 1, spec) == [
        "cell 2 (below the check) calls check_recorded_steps again: run with the answer, it "
        "prints it; the solution belongs in docs/instructors.md",
        "cell 2 (below the check) comment shows 'steps 2 and 3' (pattern 'steps? 2 and 3')",
        "cell 3 (below the check) stored output shows 'ProfilerStep#2' (pattern 'ProfilerStep#\\\\d')",
        "cell 4 (below the check) markdown shows 'steps 2 and 3' (pattern 'steps? 2 and 3')",
    ]
    # Below the check, a cell may compute the answer: it runs after the learner checked.
    honest = _nb("from hpcprof_kit.exercises.nb00 import check_recorded_steps",
                 "check_recorded_steps([], job)", "print(format_schedule(rows))",
                 "md:## What you learned\n- the trace holds only the active steps")  # fmt: skip
    assert leaks(honest, 1, spec) == []


def test_a_solution_literal_is_the_fallback_pattern():
    nb = _nb("md:Which backend? The diff said xccl.", "check_names(backend=None)",
             "check_names(backend='xccl')")  # fmt: skip
    nb.cells.insert(
        0, nbformat.v4.new_code_cell("from hpcprof_kit.exercises.nb99 import check_names")
    )
    assert solution_patterns(nb, "check_names") == [r"(?<![\w])xccl(?![\w])"]
    assert leaks(nb, 2, {"text": solution_patterns(nb, "check_names")}) == [
        "cell 1 (above the check) markdown shows 'xccl' (pattern '(?<![\\\\w])xccl(?![\\\\w])')",
        "cell 3 (below the check) calls check_names again: run with the answer, it prints it; "
        "the solution belongs in docs/instructors.md",
    ]


def _nbval(folder: Path, *notebooks: Path) -> subprocess.CompletedProcess:
    """nbval over ``notebooks`` with the hidden-answers plugin, as `make test` runs it."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(folder), str(REPO / "tests"), str(REPO)]),
    }
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "nbval_hidden",
           "--nbval-lax", "--nbval-current-env", "-v", *map(str, notebooks)]  # fmt: skip
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=540)


@pytest.mark.jobs
def test_an_answer_from_the_run_is_searched_in_what_the_cells_above_print(tmp_path):
    """Notebook 09's answer depends on the learner's seed (``from_run``): the same printed line
    gives seed 14's problems away and not seed 12's."""
    check = "from hpcprof_kit.exercises.nb09 import check_diagnosis\ncheck_diagnosis(None, seed)"
    printed = "print('problems: data_loading, straggler')"
    leaky, honest = tmp_path / "98_leaky.ipynb", tmp_path / "99_honest.ipynb"
    nbformat.write(_nb("seed = 14", printed, check), leaky)
    nbformat.write(_nb("seed = 12", printed, check), honest)
    nb = nbformat.read(leaky, as_version=4)
    assert leaks(nb, 2, hidden_spec(nb, "check_diagnosis", "hpcprof_kit.exercises.nb09")) == []
    run = _nbval(tmp_path, leaky, honest)
    out = run.stdout
    assert (
        "98_leaky.ipynb: what the cells above a check print gives its answer away (hide it, or "
        "print it below the check):\ncheck_diagnosis (the check in cell 2): cell 1 (above the "
        "check) executed output shows 'data_loading'"
    ) in out, out[-3000:]
    assert "check) executed output shows 'straggler'" in out
    verdicts = re.findall(r"^(\d+_\w+)\W+ipynb::Cell 2 (PASSED|FAILED)", out, re.MULTILINE)
    assert verdicts == [("98_leaky", "FAILED"), ("99_honest", "PASSED")], out[-3000:]
    assert run.returncode == 1


@pytest.mark.jobs
def test_a_leak_planted_in_a_copy_of_notebook_01_fails_its_nbval_run(tmp_path):
    """A cell that prints the answer when it runs (nothing stored, nothing a static check reads)
    fails the notebook's nbval run, naming the notebook, the check, the cell and the text."""
    nb = nbformat.read(REPO / "notebooks" / "01_device_discovery.ipynb", as_version=4)
    index, name, module = next(c for c in check_cells(nb) if c[1] == "check_device_counts")
    nb.cells.insert(index, nbformat.v4.new_code_cell("print(len(['tile'] * 12), 'devices')"))
    del nb.cells[max(i for i, _, _ in check_cells(nb)) + 1 :]  # below the last check: not read
    (tmp_path / "notebooks").mkdir()
    planted = tmp_path / "notebooks" / "01_device_discovery.ipynb"
    nbformat.write(nb, planted)
    (tmp_path / "examples").symlink_to(REPO / "examples")
    assert leaks(nb, index + 1, hidden_spec(nb, name, module)) == []  # only running it shows
    run = _nbval(tmp_path, planted)
    assert (
        f"check_device_counts (the check in cell {index + 1}): cell {index} (above the check) "
        "executed output shows '12 devices'"
    ) in run.stdout, run.stdout[-3000:]
    assert "01_device_discovery.ipynb: what the cells above a check print" in run.stdout
    assert run.returncode == 1


def test_the_notebooks_nbval_run_carries_the_hidden_answers_check():
    """`make test`'s nbval run (and `hpcprof-kit validate`) load it from notebooks/conftest.py."""
    import nbval_hidden

    spec = importlib.util.spec_from_file_location("nb_conftest", REPO / "notebooks" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    assert conftest.pytest_runtest_call is nbval_hidden.pytest_runtest_call
    assert conftest.pytest_report_header is nbval_hidden.pytest_report_header
    recipe = (REPO / "Makefile").read_text().split("\ntest: env\n", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"pytest .*\$\(NBVAL\) .*\bnotebooks$", recipe, re.MULTILINE), recipe


def test_two_exercises_with_the_same_answer_are_named():
    # Notebook 04's first prediction before it got its own schedule: 00's answer again.
    answers = [("00_quickstart", "check_recorded_steps", [2, 3]),
               ("04_profiler_schedules", "check_second_trace", [10, 11, 12]),
               ("04_profiler_schedules", "check_my_trace", [3, 2])]  # fmt: skip
    assert repeated(answers) == [
        "04_profiler_schedules.check_my_trace repeats 00_quickstart.check_recorded_steps: "
        "both [3, 2]"
    ]
    assert repeated(answers[:2]) == []
