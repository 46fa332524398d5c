"""Notebooks in git are clean: checked outputs only, no machine paths, the lesson shape."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from hpcprof_kit.validate.clean import KERNEL_NAME, notebook_problems, strip_notebook

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_stored_notebook_is_clean(notebook: Path):
    problems = notebook_problems(notebook)
    assert not problems, (
        f"{notebook.name} is not clean:\n  - " + "\n  - ".join(problems)
        + f"\nOutputs, counts, timestamps and widget state: python -m hpcprof_kit.validate --strip notebooks/{notebook.name}"
    )  # fmt: skip


def test_the_sequence_starts_with_the_quickstart():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_quickstart.ipynb"


# ---- the checker and the stripper, on small notebooks made here -------------------------------


def _lesson(tmp_path: Path) -> nbformat.NotebookNode:
    """A minimal clean lesson: goals, parameters, checked table, exercise, close; the kit's
    kernel (its solution lives in the instructors' answer key)."""
    v4 = nbformat.v4
    params = v4.new_code_cell('system = "local"\nranks = 2')
    params.metadata["tags"] = ["parameters"]
    table = v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint('step  state')")
    table.execution_count = 1
    table.outputs = [v4.new_output("stream", name="stdout", text="step  state\n")]
    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "hpcprof-kit", "display_name": "Python (hpcprof-kit)",
                                 "language": "python"}  # fmt: skip
    nb.cells = [
        v4.new_markdown_cell("# Quickstart\n\n## Learning goals\n- run a job"),
        params,
        table,
        v4.new_code_cell("answer = None\ncheck_answer(answer)"),
        v4.new_markdown_cell("## What you learned\n- a lot"),
    ]
    return nb


def _write(nb: nbformat.NotebookNode, path: Path) -> Path:
    nbformat.write(nb, path)
    return path


def test_a_clean_lesson_has_no_problems(tmp_path):
    assert notebook_problems(_write(_lesson(tmp_path), tmp_path / "ok.ipynb")) == []


def test_each_kind_of_dirt_is_named(tmp_path):
    nb = _lesson(tmp_path)
    v4 = nbformat.v4
    noisy = nb.cells[3]
    noisy.execution_count = 7
    noisy.outputs = [
        v4.new_output("stream", name="stdout", text="run dir /tmp/hpcprof-runs/train_local\n"),
        v4.new_output("stream", name="stderr", text="USDT: ...\n"),
    ]
    nb.cells[2].metadata["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00"}
    nb.cells[1].metadata["tags"] = []
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}
    problems = notebook_problems(_write(nb, tmp_path / "dirty.ipynb"))
    assert problems == [
        "contains the machine path '/tmp/'",
        "exactly one cell must be tagged 'parameters' (found 0: cells [])",
        "cell 3: stores outputs but does not start with # NBVAL_CHECK_OUTPUT; clear them",
        "cell 3: stores stderr output (warnings, Kineto noise); clear it",
        "cell 3: execution_count 7 is noise on a cell without checked outputs",
        "cells [2]: metadata 'execution' holds run timestamps; strip them",
        "notebook metadata stores widget state ('widgets'); strip it",
    ]


def test_missing_lesson_parts_are_named(tmp_path):
    nb = _lesson(tmp_path)
    nb.cells = nb.cells[1:3]  # no goals, no exercise, no close
    nb.metadata["kernelspec"]["name"] = "python3"
    problems = notebook_problems(_write(nb, tmp_path / "bare.ipynb"))
    assert problems == [
        "the first cell must be markdown with the learning goals",
        'the last cell must be markdown headed "What you learned"',
        "no exercise cell calls a check_...() helper",
        "kernelspec name is 'python3', not 'hpcprof-kit', the kernel `make lab` registers; "
        "pick 'Python (hpcprof-kit)' in JupyterLab's kernel menu and save",
    ]


def test_the_notebooks_kernel_is_the_one_make_lab_registers():
    makefile = (NOTEBOOKS[0].parents[1] / "Makefile").read_text()
    assert f"ipykernel install --user --name {KERNEL_NAME} " in makefile


def test_checked_output_without_a_count_is_caught(tmp_path):
    nb = _lesson(tmp_path)
    nb.cells[2].execution_count = None  # nbval would fail: "Unrun reference cell has outputs"
    problems = notebook_problems(_write(nb, tmp_path / "n.ipynb"))
    assert problems == ["cell 2: checked outputs need an execution_count or nbval fails the cell"]


def test_strip_keeps_checked_outputs_and_clears_the_rest(tmp_path):
    nb = _lesson(tmp_path)
    v4 = nbformat.v4
    nb.cells[2].execution_count = 12
    nb.cells[2].outputs.append(v4.new_output("stream", name="stderr", text="warning\n"))
    nb.cells[3].execution_count = 13
    nb.cells[3].outputs = [
        v4.new_output("execute_result", data={"text/plain": "42"}, execution_count=13)
    ]
    nb.cells[1].metadata["execution"] = {"shell.execute_reply": "2026-01-01T00:00:01"}
    nb.metadata["widgets"] = {"state": {}}
    path = _write(nb, tmp_path / "n.ipynb")

    assert strip_notebook(path) is True
    stored = json.loads(path.read_text())
    cells = stored["cells"]
    assert cells[2]["outputs"] == [
        {"name": "stdout", "output_type": "stream", "text": ["step  state\n"]}
    ]
    assert cells[2]["execution_count"] == 1
    assert cells[3]["outputs"] == [] and cells[3]["execution_count"] is None
    assert "execution" not in cells[1]["metadata"] and "widgets" not in stored["metadata"]
    assert stored["metadata"]["kernelspec"]["name"] == KERNEL_NAME  # the kernel stays
    assert notebook_problems(path) == []
    assert strip_notebook(path) is False  # a second pass changes nothing


def test_strip_from_the_command_line(tmp_path, capsys):
    from hpcprof_kit.validate.__main__ import main

    nb = _lesson(tmp_path)
    nb.cells[3].outputs = [nbformat.v4.new_output("stream", name="stdout", text="x\n")]
    path = _write(nb, tmp_path / "n.ipynb")
    assert main(["--strip", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: stripped\n"
    assert main(["--check-clean", "--notebooks", str(path)]) == 0
    assert capsys.readouterr().out == "n.ipynb: clean\n"
