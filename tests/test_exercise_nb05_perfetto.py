"""Notebook 05 has a Perfetto task: open the run's merged trace in ui.perfetto.dev, query the
``slice`` table for the slices with one name, and type their count and total; the check
compares them with the kit's ``same_name`` on the same file, offline. Before, 05 analysed only
through the kit's wrappers and no task used Perfetto.

The numbers a right query gives are computed here from the merged file's complete events, as
Perfetto's JSON importer reads them (one slice per ``"ph": "X"`` event, ``dur`` in µs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from hpcprof_kit.exercises.nb05 import check_same_name_query
from hpcprof_kit.traces import merge_to_chrome

REPO = Path(__file__).resolve().parents[1]
NB05 = REPO / "notebooks" / "05_reading_traces.ipynb"
RUN = REPO / "tests" / "fixtures" / "traces" / "ddp_cpu_2rank"
NAME = "aten::linear"


@pytest.fixture(scope="module")
def merged(tmp_path_factory) -> Path:
    return merge_to_chrome(RUN, tmp_path_factory.mktemp("perfetto") / "merged.json")


def _query(trace: Path, name: str = NAME) -> tuple[int, float]:
    """``SELECT COUNT(*), SUM(dur) / 1e6 FROM slice WHERE name = ...`` on the JSON file."""
    events = json.loads(trace.read_text())["traceEvents"]
    durs = [float(e["dur"]) for e in events if e.get("ph") == "X" and e.get("name") == name]
    return len(durs), sum(durs) / 1e3


def test_perfetto_task_is_in_notebook_05_with_placeholders():
    nb = nbformat.read(NB05, as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert "ui.perfetto.dev" in text and "FROM slice WHERE" in text
    check = next(c.source for c in nb.cells if "check_same_name_query(" in c.source)
    assert "perfetto_count = None" in check and "perfetto_total_ms = None" in check
    assert (
        'check_same_name_query(perfetto_count, perfetto_total_ms, merged, name="aten::linear")'
        in check
    )


def test_perfetto_placeholders_are_not_yet(merged, capsys):
    assert not check_same_name_query(None, None, merged)
    assert "type the two numbers your query gave" in capsys.readouterr().out


def test_perfetto_query_numbers_accepted_as_perfetto_shows_them(merged, capsys):
    count, total = _query(merged)
    assert count > 0
    assert check_same_name_query(count, round(total, 3), merged)
    assert check_same_name_query(str(count), f"{total:.2f}", merged)
    assert capsys.readouterr().out.count("Correct - Perfetto and same_name agree") == 2


@pytest.mark.parametrize(
    ("scale", "says"),
    [(1e6, "looks like nanoseconds"), (1e3, "looks like microseconds"), (2.0, "not the file's")],
)
def test_perfetto_wrong_total_says_what_it_saw(merged, capsys, scale, says):
    count, total = _query(merged)
    assert not check_same_name_query(count, total * scale, merged)
    printed = capsys.readouterr().out
    assert says in printed and "the count agrees" in printed


def test_perfetto_other_name_or_file_is_not_yet(merged, capsys):
    count, total = _query(merged, "aten::addmm")
    assert not check_same_name_query(count, total, merged)
    printed = capsys.readouterr().out
    assert "name = 'aten::linear' exactly" in printed
    assert not re.search(rf"\b{_query(merged)[0]}\b", printed)  # the right count is not shown
