"""Every exercise's answer stays hidden until its check cell: predict first, then check.

A check cell is a code cell that calls a ``check_...(`` helper imported from
``hpcprof_kit.exercises.nbNN``. Above it, nothing may give the answer away:

- no markdown and no stored output of a cell above may match the answer's text patterns;
- no code cell above may use a name that computes or prints the answer;
- answers computed from the learner's own run (``from_run``) are checked against the outputs the
  cells above print when they run: the notebook is executed up to the check cell.

What gives an answer away is declared next to its checker, in the exercise module:

    HIDDEN = {"check_x": {"text": [regex, ...], "code": [name, ...], "from_run": "func"}}

``func`` lives in the same module; its parameters are names of the notebook's variables and it
returns the regexes of the learner's own answer. A checker without ``HIDDEN`` falls back to the
notebook's solution call: its string and list arguments become the patterns (bare numbers are too
common to search for, so such a checker must declare ``HIDDEN``).

Cost: the stored-output check reads the files only. Cells whose output nbval compares
(``# NBVAL_CHECK_OUTPUT``) print what is stored, so their executed output is covered by nbval in
``make test``; the other cells above a check may not use a revealing name. Only notebooks with a
``from_run`` answer are executed here, up to their check cell.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
IMPORT = re.compile(r"from\s+(hpcprof_kit\.exercises\.nb\d+)\s+import\s+([^\n]+)")
PATTERNS_MARK = "HIDDEN-PATTERNS:"


def _python(source: str) -> ast.Module | None:
    """The cell's Python, IPython magics and shell lines blanked out; None if it does not parse."""
    lines = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _check_calls(source: str) -> list[ast.Call]:
    tree = _python(source)
    calls = [n for n in ast.walk(tree)] if tree else []
    return [n for n in calls if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id.startswith("check_")]  # fmt: skip


def _checkers(nb) -> dict[str, str]:
    """check name -> exercise module, from the notebook's imports."""
    found: dict[str, str] = {}
    for cell in nb.cells:
        for module, names in IMPORT.findall(cell.source if cell.cell_type == "code" else ""):
            for name in re.findall(r"\bcheck_\w+", names):
                found[name] = module
    return found


def check_cells(nb) -> list[tuple[int, str, str]]:
    """(cell index, check name, module) for every cell calling an exercise checker."""
    checkers = _checkers(nb)
    return [(i, call.func.id, checkers[call.func.id])
            for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for call in _check_calls(cell.source) if call.func.id in checkers]  # fmt: skip


def _output_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        for mime in ("text/plain", "text/html", "text/markdown"):
            parts.append(str(out.get("data", {}).get(mime, "")))
        parts.append("\n".join(out.get("traceback", [])))
    return "\n".join(parts)


def _literal_patterns(value) -> list[str]:
    if isinstance(value, str):
        return [rf"(?<![\w]){re.escape(value)}(?![\w])"]
    if isinstance(value, (list, tuple, set)) and value:
        items = ", ".join(repr(v) for v in (sorted(value) if isinstance(value, set) else value))
        return [re.escape(f"[{items}]"), re.escape(f"({items})"), re.escape(f"{{{items}}}")]
    return []  # numbers, None, booleans: too common to search for


def solution_patterns(nb, name: str) -> list[str]:
    """Patterns from the last call of ``name`` whose arguments are all literals (the solution)."""
    for cell in reversed(nb.cells):
        if cell.cell_type != "code":
            continue
        for call in _check_calls(cell.source):
            if call.func.id != name:
                continue
            try:
                values = [ast.literal_eval(a) for a in call.args]
                values += [ast.literal_eval(k.value) for k in call.keywords]
            except ValueError:
                continue
            if values and all(v is not None for v in values):
                return [p for v in values for p in _literal_patterns(v)]
    return []


def hidden_spec(nb, name: str, module: str) -> dict:
    declared = getattr(importlib.import_module(module), "HIDDEN", {}).get(name)
    if declared is not None:
        return declared
    return {"text": solution_patterns(nb, name), "code": []}


def leaks(nb, index: int, spec: dict, outputs_above: list[str] | None = None) -> list[str]:
    """What above cell ``index`` gives the answer away, one line per finding."""
    found = []
    above = list(enumerate(nb.cells[:index]))
    for j, cell in above:
        texts = [("markdown", cell.source)] if cell.cell_type == "markdown" else []
        if cell.cell_type == "code":
            texts.append(("stored output", _output_text(cell)))
            if outputs_above is not None:
                texts.append(("executed output", outputs_above[j]))
            for name in spec.get("code", []):
                if re.search(rf"(?<![\w]){re.escape(name)}\b", cell.source):
                    found.append(f"cell {j} uses {name}, which gives the answer away")
        for where, text in texts:
            for pattern in spec.get("text", []):
                hit = re.search(pattern, text)
                if hit:
                    found.append(f"cell {j} {where} shows {hit.group(0)!r} (pattern {pattern!r})")
    return found


def execute_to(path: Path, index: int, module: str, func: str) -> tuple[list[str], list[str]]:
    """Run the notebook's cells above ``index`` (in the notebook's folder), then ``func`` from
    ``module`` on the kernel's variables: (each cell's printed output, the answer's patterns)."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    probe = (
        f"import inspect as _i, json as _j\nfrom {module} import {func} as _f\n"
        f"print({PATTERNS_MARK!r} + _j.dumps(_f(**{{p: globals()[p] for p in "
        "_i.signature(_f).parameters})))"
    )
    cells = [*nb.cells[:index], nbformat.v4.new_code_cell(probe)]
    run = nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata)
    NotebookClient(run, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()  # fmt: skip
    printed = [_output_text(c) if c.cell_type == "code" else "" for c in run.cells]
    patterns = json.loads(printed[-1].split(PATTERNS_MARK, 1)[1])
    return printed[:-1], patterns


CASES = [
    pytest.param(path, index, name, module, id=f"{path.stem}:{index}:{name}")
    for path in NOTEBOOKS
    for index, name, module in check_cells(nbformat.read(path, as_version=4))
]


def test_every_notebook_has_an_exercise_with_a_check_cell():
    assert [p.name for p in NOTEBOOKS if not check_cells(nbformat.read(p, as_version=4))] == []


@pytest.mark.parametrize(("path", "index", "name", "module"), CASES)
def test_answer_appears_nowhere_above_its_check(path, index, name, module):
    nb = nbformat.read(path, as_version=4)
    spec = hidden_spec(nb, name, module)
    if not (spec.get("text") or spec.get("from_run")):
        pytest.fail(
            f"{module}.{name}: nothing says what its answer looks like; declare "
            f'HIDDEN = {{"{name}": {{"text": [...], "code": [...]}}}} in {module}'
        )
    assert leaks(nb, index, spec) == []
    if spec.get("from_run"):
        printed, patterns = execute_to(path, index, module, spec["from_run"])
        assert leaks(nb, index, {"text": patterns}, outputs_above=printed) == []


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
    assert found[0] == "cell 0 uses HIERARCHY_NOTES, which gives the answer away"
    assert "cell 0 stored output shows '12 devices'" in found[1]


def test_a_solution_literal_is_the_fallback_pattern():
    nb = _nb("md:Which backend? The diff said xccl.", "check_names(backend=None)",
             "check_names(backend='xccl')")  # fmt: skip
    nb.cells.insert(
        0, nbformat.v4.new_code_cell("from hpcprof_kit.exercises.nb99 import check_names")
    )
    assert solution_patterns(nb, "check_names") == [r"(?<![\w])xccl(?![\w])"]
    assert leaks(nb, 2, {"text": solution_patterns(nb, "check_names")}) == [
        "cell 1 markdown shows 'xccl' (pattern '(?<![\\\\w])xccl(?![\\\\w])')"
    ]


def test_an_answer_from_the_run_is_searched_in_what_the_cells_above_print(tmp_path, monkeypatch):
    (tmp_path / "nb_probe.py").write_text(
        "HIDDEN = {'check_total': {'from_run': 'answer_patterns'}}\n"
        "def answer_patterns(total):\n    return [rf'\\b{total}\\b']\n"
        "def check_total(answer):\n    return answer is not None\n"
    )
    path = tmp_path / "99_probe.ipynb"
    nbformat.write(_nb("total = sum(range(7)) * 1001", "print('steps:', total)",
                       "from nb_probe import check_total\ncheck_total(None)"), path)  # fmt: skip
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{REPO}")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("nb_probe", None)
    printed, patterns = execute_to(path, 2, "nb_probe", "answer_patterns")
    assert patterns == [r"\b21021\b"]
    nb = nbformat.read(path, as_version=4)
    assert leaks(nb, 2, {"text": patterns}) == []  # nothing stored: only the run shows it
    assert leaks(nb, 2, {"text": patterns}, outputs_above=printed) == [
        "cell 1 executed output shows '21021' (pattern '\\\\b21021\\\\b')"
    ]
