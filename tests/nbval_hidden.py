"""What the cells above each exercise's check print, searched for its answer during nbval's run.

nbval runs every code cell of a notebook in one kernel, top to bottom, and so prints what a
learner sees on "Run All". This plugin (loaded by notebooks/conftest.py, so `make test`'s nbval
run and `hpcprof-kit validate` carry it) keeps what each cell printed as nbval received it.
Just before the notebook's last check cell runs, it asks the kernel for the answers computed
from the learner's own run (an exercise's ``from_run``); once that cell ran, each check's answer
is searched in what the cells above that check printed, and a find fails the check cell,
naming the notebook, the check, the cell that printed it and the text shown.

The notebook is executed once for nbval and this check together. The checks that read the
files only (markdown, stored outputs, comments, code names) are tests/test_exercises_hidden.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hidden_answers import check_cells, hidden_spec, leaks, output_text, probe_answers, probe_source

# Output messages of the probe arrive within this many seconds of its reply (nbval waits 5 s).
_OUTPUT_WAIT_S = 30


@dataclass
class _Notebook:
    """One notebook under nbval: its exercises and what each cell printed so far."""

    nb: object
    exercises: list[tuple[int, str, str]]
    specs: dict[str, dict]
    printed: list[str] = field(default_factory=list)
    from_run: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def read(cls, nb) -> _Notebook:
        exercises = check_cells(nb)
        specs = {name: hidden_spec(nb, name, module) for _, name, module in exercises}
        return cls(nb, exercises, specs, [""] * len(nb.cells))

    @property
    def last_check(self) -> int | None:
        return max((i for i, _, _ in self.exercises), default=None)

    def probes(self) -> dict[str, str]:
        return {name: self.specs[name]["from_run"]
                for _, name, _ in self.exercises if self.specs[name].get("from_run")}  # fmt: skip

    def found(self) -> list[str]:
        """Each answer shown by what a cell above its check printed, one line per find."""
        printed = self.printed[: self.last_check]
        found = []
        for index, name, _ in self.exercises:
            spec = {"text": [*self.specs[name].get("text", []), *self.from_run.get(name, [])]}
            found += [f"{name} (the check in cell {index}): {f}"
                      for f in leaks(self.nb, index, spec, executed=printed)
                      if "executed output" in f]  # fmt: skip
        return found


_BOOKS: dict[str, _Notebook] = {}


def _book(item) -> _Notebook:
    key = item.parent.nodeid
    if key not in _BOOKS:
        _BOOKS[key] = _Notebook.read(item.parent.nb)
    return _BOOKS[key]


def _ask_kernel(item, probes: dict[str, str]) -> dict[str, list[str]]:
    """Run the probes in the notebook's kernel (its variables as the check cell will see them)."""
    kernel = item.parent.kernel
    code = "".join(probe_source(key, func) for key, func in probes.items())
    msg_id = kernel.execute_cell_input(code, allow_stdin=False)
    kernel.await_reply(msg_id, timeout=item.config.option.nbval_cell_timeout)
    printed, error = [], None
    while True:  # this execution's messages, to its idle status, so nbval's next read is clean
        msg = kernel.get_message("iopub", timeout=_OUTPUT_WAIT_S)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content["execution_state"] == "idle":
            break
        if kind == "stream":
            printed.append(content["text"])
        if kind == "error":
            error = f"{content['ename']}: {content['evalue']}"
    if error:
        pytest.fail(f"the answer of the learner's run ({probes}) could not be computed: {error}")
    return probe_answers("".join(printed))


def pytest_report_header(config):
    if config.getoption("nbval_lax", default=False) or config.getoption("nbval", default=False):
        return "hidden answers: what the cells above each check print is searched (nbval_hidden)"
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if type(item).__name__ != "IPyNbCell":
        return (yield)
    book = _book(item)
    index = next(i for i, cell in enumerate(book.nb.cells) if cell is item.cell)
    if index == book.last_check and book.probes():
        book.from_run = _ask_kernel(item, book.probes())
    try:
        result = yield
    finally:
        book.printed[index] = output_text({"outputs": item.test_outputs or []})
    if index == book.last_check:
        found = book.found()
        if found:
            name = Path(str(item.parent.path)).name
            pytest.fail(
                f"{name}: what the cells above a check print gives its answer away "
                "(hide it, or print it below the check):\n" + "\n".join(found),
                pytrace=False,
            )
    return result
