"""Every exercise's answer stays out of sight: predict first, then check.

A check cell is a code cell that calls a ``check_...(`` helper imported from
``hpcprof_kit.exercises.nbNN``. Anywhere in the notebook, above or below the check, nothing a
learner sees while scrolling may give its answer away:

- no markdown (the "What you learned" cell included) and no stored output of any cell may match
  the answer's text patterns, and no code comment either (a "# Solution: ..." line);
- no other cell calls the checker: a second call with the answer prints it under the learner's
  own check on "Run All" (solutions live in the instructors' answer key, docs/instructors.md);
- no code cell above the check may use a name that computes or prints the answer;
- the notebook is executed up to its last check cell, and what the cells above each check print
  when they run may not show the answer either (answers computed from the learner's own run,
  ``from_run``, are searched there too);
- no two exercises of the course have the same answer (``answer``: the same prediction twice
  teaches nothing the second time).

What gives an answer away is declared next to its checker, in the exercise module:

    HIDDEN = {"check_x": {"text": [regex, ...], "code": [name, ...], "from_run": "func",
                          "answer": "func"}}

``from_run``'s parameters are names of the notebook's variables and it returns the regexes of
the learner's own answer; ``answer`` takes no parameters and returns the answer for the
notebook's own parameters. A checker without ``HIDDEN`` falls back to the notebook's solution
call: its string and list arguments become the patterns (bare numbers are too common to search
for, so such a checker must declare ``HIDDEN``).

Cost: the stored-output, markdown and comment checks read the files only; the executed check
runs each notebook once, up to its last check cell.
"""

from __future__ import annotations

import ast
import importlib
import io
import json
import re
import sys
import tokenize
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
    """(cell index, check name, module) for the first cell calling each exercise checker: the
    learner's check (any later call is a solution, which ``leaks`` names)."""
    checkers = _checkers(nb)
    found: dict[str, tuple[int, str, str]] = {}
    for i, cell in enumerate(nb.cells):
        for call in _check_calls(cell.source) if cell.cell_type == "code" else []:
            if call.func.id in checkers:
                found.setdefault(call.func.id, (i, call.func.id, checkers[call.func.id]))
    return sorted(found.values())


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


def _comments(source: str) -> str:
    """The cell's comments, one a line (a solution written as a comment shows as text)."""
    lines = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines()]
    try:
        tokens = tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline)
        return "\n".join(t.string for t in tokens if t.type == tokenize.COMMENT)
    except (tokenize.TokenError, SyntaxError):
        return "\n".join(ln[ln.index("#") :] for ln in lines if "#" in ln)


def _where(j: int, index: int) -> str:
    return "the check" if j == index else f"{'above' if j < index else 'below'} the check"


def leaks(nb, index: int, spec: dict, executed: list[str] | None = None) -> list[str]:
    """What in the notebook gives away the answer of the check in cell ``index``, one line per
    finding. ``executed``: what each cell above the check printed when it ran."""
    found = []
    name = next((c.func.id for c in _check_calls(nb.cells[index].source)), None)
    for j, cell in enumerate(nb.cells):
        where = _where(j, index)
        texts = [("markdown", cell.source)] if cell.cell_type == "markdown" else []
        if cell.cell_type == "code":
            texts += [("stored output", _output_text(cell)), ("comment", _comments(cell.source))]
            if executed is not None and j < index:
                texts.append(("executed output", executed[j]))
            if j < index:
                for code in spec.get("code", []):
                    if re.search(rf"(?<![\w]){re.escape(code)}\b", cell.source):
                        found.append(f"cell {j} ({where}) uses {code}, which gives the answer away")
            if j != index and any(c.func.id == name for c in _check_calls(cell.source)):
                found.append(f"cell {j} ({where}) calls {name} again: run with the answer, it "
                             "prints it; the solution belongs in docs/instructors.md")  # fmt: skip
        for kind, text in texts:
            for pattern in spec.get("text", []):
                hit = re.search(pattern, text)
                if hit:
                    found.append(f"cell {j} ({where}) {kind} shows {hit.group(0)!r} "
                                 f"(pattern {pattern!r})")  # fmt: skip
    return found


def execute_to(path: Path, index: int, probes: dict[str, tuple[str, str]] | None = None):
    """Run the notebook's cells above ``index`` (in the notebook's folder), then each probe
    ``{key: (module, func)}`` on the kernel's variables: (each cell's printed output,
    {key: the answer's patterns})."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    cells = list(nb.cells[:index])
    for key, (module, func) in (probes or {}).items():
        cells.append(nbformat.v4.new_code_cell(
            f"import inspect as _i, json as _j\nfrom {module} import {func} as _f\n"
            f"print({(PATTERNS_MARK + key + '=')!r} + _j.dumps(_f(**{{p: globals()[p] for p in "
            "_i.signature(_f).parameters})))"
        ))  # fmt: skip
    run = nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata)
    NotebookClient(run, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()  # fmt: skip
    printed = [_output_text(c) if c.cell_type == "code" else "" for c in run.cells]
    patterns = {}
    for text in printed[index:]:
        key, _, value = text.split(PATTERNS_MARK, 1)[1].partition("=")
        patterns[key] = json.loads(value)
    return printed[:index], patterns


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
            f'HIDDEN = {{"{name}": {{"text": [...], "code": [...]}}}} in {module}'
        )
    assert leaks(nb, index, spec) == []


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if _exercises(p)], ids=lambda p: p.stem)
def test_what_the_cells_above_each_check_print_hides_its_answer(path):
    nb = nbformat.read(path, as_version=4)
    exercises = _exercises(path)
    specs = {name: hidden_spec(nb, name, module) for _, name, module in exercises}
    probes = {name: (module, specs[name]["from_run"])
              for _, name, module in exercises if specs[name].get("from_run")}  # fmt: skip
    printed, from_run = execute_to(path, max(i for i, _, _ in exercises), probes)
    found = []
    for index, name, _ in exercises:
        spec = {"text": [*specs[name].get("text", []), *from_run.get(name, [])]}
        found += [f"{name}: {f}" for f in leaks(nb, index, spec, executed=printed)
                  if "executed output" in f]  # fmt: skip
    assert found == []


def course_answers() -> list[tuple[str, str, object]]:
    """(notebook, check, answer) for every exercise whose HIDDEN names an ``answer``."""
    found = []
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for _, name, module in _exercises(path):
            func = hidden_spec(nb, name, module).get("answer")
            if func:
                found.append((path.stem, name, getattr(importlib.import_module(module), func)()))
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
    printed, patterns = execute_to(path, 2, {"check_total": ("nb_probe", "answer_patterns")})
    assert patterns == {"check_total": [r"\b21021\b"]}
    nb = nbformat.read(path, as_version=4)
    assert leaks(nb, 2, {"text": patterns["check_total"]}) == []  # nothing stored: only the run
    assert leaks(nb, 2, {"text": patterns["check_total"]}, executed=printed) == [
        "cell 1 (above the check) executed output shows '21021' (pattern '\\\\b21021\\\\b')"
    ]


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
