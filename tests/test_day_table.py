"""The day fits: docs/instructors.md's time table is the one ``hpcprof-kit validate --timing``
computes from the notebooks (their words, code cells, checks and ``(optional)`` sections, by
the method the guide states) and the measured headless wall times; its core path stays within
4.5 hours. Before, the guide budgeted 250 minutes by hand, against an estimate of 330 from
reading the notebooks."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from hpcprof_kit.validate import day

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
GUIDE = REPO / "docs" / "instructors.md"


def _committed() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    start, end = "<!-- day-table: hpcprof-kit validate --timing -->", "<!-- /day-table -->"
    assert start in text and end in text, "docs/instructors.md lost the day table's markers"
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def test_the_guide_s_table_is_the_one_the_notebooks_give():
    rows = day.day_rows(NOTEBOOKS)
    assert _committed() == day.table_markdown(rows) + "\n\n" + day.day_text(rows)


def test_the_core_path_fits_in_four_and_a_half_hours():
    rows = day.day_rows(NOTEBOOKS)
    assert day.core_minutes(rows) <= day.CORE_LIMIT_MIN == 270


def test_every_notebook_has_a_measured_machine_time():
    names = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    assert sorted(day.MACHINE_S) == names
    assert all(s > 0 for s in day.MACHINE_S.values())


def test_the_table_lists_exactly_the_sections_the_notebooks_mark_optional():
    marked = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        heads = [ln[3:].strip() for c in nb.cells if c.cell_type == "markdown"
                 for ln in c.source.splitlines() if ln.startswith("## ")]  # fmt: skip
        marked[path.stem] = [h for h in heads if h.endswith("(optional)")]
    rows = {r.notebook: r.optional for r in day.day_rows(NOTEBOOKS)}
    assert rows == marked and sum(map(len, marked.values())) >= 1


def test_the_method_is_the_one_the_guide_states():
    text = re.sub(r"\s+", " ", GUIDE.read_text(encoding="utf-8"))
    assert f"{day.WORDS_PER_MIN} words a minute" in text
    assert f"{day.CELL_MIN} min per code cell" in text
    assert f"{day.EXERCISE_MIN:.0f} min per exercise" in text
    assert f"welcome {day.WELCOME_MIN} min" in text
    # a section of 400 words, 2 code cells and a check: 2 + 1 + 5 minutes
    assert day.minutes(words=400, cells=2, exercises=1) == 8.0


def test_a_section_marked_optional_leaves_the_core_path(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# N\n" + "word " * 197),
        nbformat.v4.new_code_cell("check_x(1)"),
        nbformat.v4.new_markdown_cell("## 2. More (optional)\n" + "word " * 193),
        nbformat.v4.new_code_cell("x = 1"),
    ]
    path = tmp_path / "99_x.ipynb"
    nbformat.write(nb, path)
    row = day.row(path, {"99_x": 60})
    assert row.optional == ["2. More (optional)"]
    # core: 200 words (1 min), a cell (0.5), a check (5), 60 s of machine (1); optional: 200
    # words and a cell
    assert (row.core_min, row.optional_min) == (7.5, 1.5)
