"""Clean notebooks in git: what a stored notebook may hold, and a stripper for the rest.

A notebook in the repository stores outputs only for cells that start with
``# NBVAL_CHECK_OUTPUT`` (the teaching artefacts nbval compares), no stderr or tracebacks,
no machine paths, no execution counts except on those checked cells (nbval skips a cell whose
count is empty and fails it when it has outputs), no widget state. It also has the lesson
shape: learning goals first, one ``parameters`` cell, an exercise calling a ``check_...``
helper (its solution lives in the instructors' answer key, not in the notebook), "What you
learned" last, and the kernel ``make lab`` registers.

>>> from hpcprof_kit.validate.clean import notebook_problems, strip_notebook   # doctest: +SKIP
>>> notebook_problems("notebooks/00_quickstart.ipynb")                           # doctest: +SKIP
[]
>>> strip_notebook("notebooks/04_profiler_schedule.ipynb")   # True when it changed  # doctest: +SKIP
True
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

CHECK_MARK = "# NBVAL_CHECK_OUTPUT"
# Paths of one machine: they leak a user's layout and never match on another machine.
MACHINE_PATHS = ("/work/", "/tmp/", "/root/", "/home/")
_GOALS = re.compile(r"goal|you will|you'll|learn", re.IGNORECASE)
_LEARNED = re.compile(r"what you(?:'ve| have)? learn(?:ed|t)", re.IGNORECASE)
_CHECK_CALL = re.compile(r"\bcheck_\w+\s*\(")
# The Jupyter kernel `make lab` registers (ipykernel install --name); every notebook declares it.
KERNEL_NAME = "hpcprof-kit"
# Canonical count on checked cells: nbval needs one; a fixed value keeps diffs quiet.
CHECKED_COUNT = 1


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _is_checked(cell: dict[str, Any]) -> bool:
    return cell.get("cell_type") == "code" and _source(cell).lstrip().startswith(CHECK_MARK)


def _read(path: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
    text = Path(path).read_text(encoding="utf-8")
    return text, json.loads(text)


def _kernel_problems(nb: dict[str, Any]) -> list[str]:
    name = nb.get("metadata", {}).get("kernelspec", {}).get("name")
    if name == KERNEL_NAME:
        return []
    return [
        f"kernelspec name is {name!r}, not {KERNEL_NAME!r}, the kernel `make lab` registers; "
        f"pick 'Python (hpcprof-kit)' in JupyterLab's kernel menu and save"
    ]


def _structure_problems(cells: list[dict[str, Any]]) -> list[str]:
    problems = []
    if not cells or cells[0].get("cell_type") != "markdown" or not _GOALS.search(_source(cells[0])):
        problems.append("the first cell must be markdown with the learning goals")
    if (
        not cells
        or cells[-1].get("cell_type") != "markdown"
        or not _LEARNED.search(_source(cells[-1]))
    ):
        problems.append('the last cell must be markdown headed "What you learned"')
    tagged = [
        i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", [])
    ]
    if len(tagged) != 1:
        problems.append(
            f"exactly one cell must be tagged 'parameters' (found {len(tagged)}: cells {tagged})"
        )
    elif cells[tagged[0]].get("cell_type") != "code":
        problems.append(f"cell {tagged[0]}: the 'parameters' tag belongs on a code cell")
    code = [c for c in cells if c.get("cell_type") == "code"]
    if not any(_CHECK_CALL.search(_source(c)) for c in code):
        problems.append("no exercise cell calls a check_...() helper")
    return problems


def _cell_problems(i: int, cell: dict[str, Any]) -> list[str]:
    if cell.get("cell_type") != "code":
        return []
    problems = []
    outputs = cell.get("outputs", [])
    checked = _is_checked(cell)
    if outputs and not checked:
        problems.append(
            f"cell {i}: stores outputs but does not start with {CHECK_MARK}; clear them"
        )
    for out in outputs:
        if out.get("output_type") == "stream" and out.get("name") == "stderr":
            problems.append(f"cell {i}: stores stderr output (warnings, Kineto noise); clear it")
        if out.get("output_type") == "error":
            problems.append(
                f"cell {i}: stores a traceback ({out.get('ename')}); fix and re-run the cell"
            )
    count = cell.get("execution_count")
    if checked and outputs and count is None:
        problems.append(
            f"cell {i}: checked outputs need an execution_count or nbval fails the cell"
        )
    if count is not None and not (checked and outputs):
        problems.append(
            f"cell {i}: execution_count {count} is noise on a cell without checked outputs"
        )
    return problems


def _starts_a_path(path: str, text: str) -> bool:
    """``path`` where a path starts (``"/tmp/x"``, ``dir=/tmp/x``), not inside a script's own
    relative one (``"$out/tmp/rank0"``).

    >>> _starts_a_path("/tmp/", 'run dir /tmp/runs'), _starts_a_path("/tmp/", 'TMPDIR="$out/tmp/r0"')
    (True, False)
    """
    return re.search(r"(?<![\w$}.-])" + re.escape(path), text) is not None


def notebook_problems(path: str | os.PathLike[str]) -> list[str]:
    """Every reason this notebook is not clean enough to commit (empty when it is)."""
    text, nb = _read(path)
    problems = [
        f"contains the machine path {p!r}" for p in MACHINE_PATHS if _starts_a_path(p, text)
    ]
    cells = nb.get("cells", [])
    problems += _structure_problems(cells) + _kernel_problems(nb)
    for i, cell in enumerate(cells):
        problems += _cell_problems(i, cell)
    # JupyterLab's per-cell run timestamps: one line for all of them, they have one fix.
    stamped = [i for i, c in enumerate(cells) if "execution" in c.get("metadata", {})]
    if stamped:
        problems.append(f"cells {stamped}: metadata 'execution' holds run timestamps; strip them")
    if "widgets" in nb.get("metadata", {}):
        problems.append("notebook metadata stores widget state ('widgets'); strip it")
    return problems


def _strip_cell(cell: dict[str, Any]) -> None:
    cell.get("metadata", {}).pop("execution", None)
    if cell.get("cell_type") != "code":
        return
    keep = []
    if _is_checked(cell):
        keep = [
            o
            for o in cell.get("outputs", [])
            if o.get("output_type") != "error"
            and not (o.get("output_type") == "stream" and o.get("name") == "stderr")
        ]
    for out in keep:
        if "execution_count" in out:
            out["execution_count"] = CHECKED_COUNT
    cell["outputs"] = keep
    cell["execution_count"] = CHECKED_COUNT if keep else None


def strip_notebook(path: str | os.PathLike[str]) -> bool:
    """Clear every output but checked ones, and execution noise; True when the file changed.

    Machine paths and lesson structure are left for the author: they need a human decision.
    """
    text, nb = _read(path)
    for cell in nb.get("cells", []):
        _strip_cell(cell)
    nb.get("metadata", {}).pop("widgets", None)
    # nbformat's own layout, so a stripped file diffs cleanly against a saved one.
    new = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if new == text:
        return False
    Path(path).write_text(new, encoding="utf-8")
    return True
