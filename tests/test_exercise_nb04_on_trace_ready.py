"""Notebook 04 has the learner write ``on_trace_ready`` for a repeating schedule, and its check
sees whether every cycle kept a trace. Before, the profiler the learner typed exported once,
after ``prof.stop()``, which keeps one cycle, and ``on_trace_ready`` appeared in no notebook.

The handler cell runs here as the notebook has it (one file name for every cycle: the last
cycle only), then fixed the two ways the notebook names: a name per call, torch's own handler."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from hpcprof_kit.exercises.nb04 import check_every_cycle_kept
from hpcprof_kit.validate.answers import HIDDEN, answer_every_cycle

REPO = Path(__file__).resolve().parents[1]
NB04 = REPO / "notebooks" / "04_profiler_schedules.ipynb"
SHIPPED = 'prof.export_chrome_trace(str(cycles_dir / "trace.json"))'


def _handler_cell() -> str:
    nb = nbformat.read(NB04, as_version=4)
    return next(c.source for c in nb.cells if "on_trace_ready=keep_cycle" in c.source)


def _run_cell(tmp_path: Path, source: str) -> Path:
    """The notebook's handler cell, run with its run directory in ``tmp_path``."""
    job = type("Job", (), {"run_dir": tmp_path})()
    scope = {"job": job}
    exec(compile(source, "cell", "exec"), scope)  # noqa: S102 - the notebook's own cell
    return scope["cycles_dir"]


def test_on_trace_ready_is_typed_in_notebook_04_with_a_check():
    nb = nbformat.read(NB04, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert (
        "on_trace_ready=keep_cycle" in code
        and "schedule(wait=1, warmup=1, active=2, repeat=3)" in code
    )
    assert "check_every_cycle_kept(cycles_dir)" in code
    for pattern in HIDDEN["nb04"]["check_every_cycle_kept"]["text"]:
        assert not re.search(pattern, nbformat.writes(nb)), pattern


def test_on_trace_ready_as_shipped_keeps_one_cycle_and_the_check_says_so(tmp_path, capsys):
    folder = _run_cell(tmp_path, _handler_cell())
    assert not check_every_cycle_kept(folder)
    printed = capsys.readouterr().out
    assert "1 file(s) in my_cycles/ hold 1 of the 3 cycles (cycles 1 and 2 lost)" in printed
    assert not any(re.search(p, printed) for p in HIDDEN["nb04"]["check_every_cycle_kept"]["text"])


@pytest.mark.parametrize(
    "fix",
    [
        answer_every_cycle(),
        "tensorboard_trace_handler(str(cycles_dir))(prof)",
        'prof.export_chrome_trace(str(cycles_dir / f"c{id(object())}-{prof.step_num}.json.gz"))',
    ],
)
def test_on_trace_ready_fixed_keeps_every_cycle(tmp_path, capsys, fix):
    source = _handler_cell()
    assert SHIPPED in source
    source = source.replace(SHIPPED, fix).replace(
        "from torch.profiler import", "from torch.profiler import tensorboard_trace_handler,"
    )
    folder = _run_cell(tmp_path, source)
    assert check_every_cycle_kept(folder)
    assert capsys.readouterr().out.endswith(
        "Correct - every cycle has its trace: ProfilerStep[2, 3], ProfilerStep[6, 7], "
        "ProfilerStep[10, 11].\n"
    )


def test_on_trace_ready_no_trace_yet(tmp_path, capsys):
    assert not check_every_cycle_kept(tmp_path)
    assert "did the cell run?" in capsys.readouterr().out
