"""What gives an exercise's answer away in a notebook: the check cells, what each declares
hidden (``HIDDEN`` in the instructors' key, hpcprof_kit/validate/answers.py) and where a
notebook shows it.

Read by the static checks (tests/test_exercises_hidden.py: markdown, stored outputs, comments,
code names) and by the check of what the cells print when they run, made during nbval's own
run of the notebooks (tests/nbval_hidden.py).
"""

from __future__ import annotations

import ast
import importlib
import io
import json
import re
import tokenize

PATTERNS_MARK = "HIDDEN-PATTERNS:"
# Where the answers and HIDDEN live: a module no notebook imports (the exercise modules the
# notebooks import checks from export no answer).
KEY_MODULE = "hpcprof_kit.validate.answers"
IMPORT = re.compile(r"from\s+(hpcprof_kit\.exercises\.nb\d+)\s+import\s+([^\n]+)")


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


def output_text(cell) -> str:
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
    """What gives ``name``'s answer away: as the key declares it for ``module``'s check, else
    the notebook's solution call."""
    hidden = importlib.import_module(KEY_MODULE).HIDDEN
    declared = hidden.get(module.rsplit(".", 1)[-1], {}).get(name)
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
            texts += [("stored output", output_text(cell)), ("comment", _comments(cell.source))]
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


def probe_source(key: str, func: str) -> str:
    """Code for the learner's kernel that prints ``func``'s answer patterns (``from_run``, in
    the key): its parameters are names of the notebook's variables. It leaves no name behind."""
    return (
        "def _hidden_answer_probe():\n"
        "    import inspect, json\n"
        f"    from {KEY_MODULE} import {func} as answer\n"
        "    names = globals()\n"
        "    found = answer(**{p: names[p] for p in inspect.signature(answer).parameters})\n"
        f"    print({(PATTERNS_MARK + key + '=')!r} + json.dumps(found))\n"
        "try:\n    _hidden_answer_probe()\nfinally:\n    del _hidden_answer_probe\n"
    )


def probe_answers(printed: str) -> dict[str, list[str]]:
    """{key: patterns} from what the probes printed."""
    found = {}
    for line in printed.splitlines():
        if line.startswith(PATTERNS_MARK):
            key, _, value = line[len(PATTERNS_MARK) :].partition("=")
            found[key] = json.loads(value)
    return found
