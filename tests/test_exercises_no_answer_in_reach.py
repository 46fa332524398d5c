"""No answer one Tab away: what a notebook's ``from hpcprof_kit.exercises import nbNN`` reaches
(every public name ``dir()`` and tab completion show, its value, its docstring and what it
returns for the notebook's own parameters) gives no exercise's answer. The answers live in the
instructors' key, hpcprof_kit/validate/answers.py, which no notebook imports."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import nbformat
import pytest
from hidden_answers import check_cells

from hpcprof_kit.validate import answers

REPO = Path(__file__).resolve().parents[1]
MODULES = sorted(p.stem for p in (REPO / "hpcprof_kit" / "exercises").glob("nb[0-9][0-9].py"))
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WORKED_SEED = 14  # the capstone run docs/instructors.md works through
PATTERN_SEED = 0  # its worked run of the patterns (a rotating slow rank, slow steps)
# The names that gave answers before the key moved out of the exercise modules.
FORMER = {"answer_key", "recorded_answer", "notebook_answer", "second_trace_answer",
          "my_trace_answer", "polaris_answer", "my_devices_answer", "my_rendezvous_answer",
          "answer_patterns", "capstone_run", "corpus_run", "device_counts", "tile_compute_units",
          "recorded_steps", "steps_in_run", "needs_a_human", "steps_in_trace", "cpus_per_rank",
          "comm_share", "HIDDEN", "ANSWERS"}  # fmt: skip
# A name that says it holds or gives an answer
ANSWER_NAME = re.compile(r"(?i)answer|(^|_)key(_|$)|hidden|solution|truth")
# What a function is called with: the notebooks' own parameters, where a name needs one (each
# set in turn: the capstone's seed of a corpus run, then of a pattern run)
NOTEBOOK_ARGS = ({"seed": WORKED_SEED}, {"seed": PATTERN_SEED})


def _public(name: str) -> dict[str, object]:
    module = importlib.import_module(f"hpcprof_kit.exercises.{name}")
    return {n: getattr(module, n) for n in dir(module) if not n.startswith("_")}


def _answer_texts() -> list[str]:
    """Every fixed answer as a notebook or a reply would print it, and the worked seed's key."""
    found = [a if isinstance(a, str) else repr(a) for _, _, a in answers.course_key()]
    return [
        *found,
        *(repr(answers.answer_key(s)) for s in (WORKED_SEED, PATTERN_SEED)),
        repr(answers.answer_key(PATTERN_SEED)["rotating_straggler"]),
    ]


def shows_an_answer(text: str, module: str) -> list[str]:
    """The answers, or the patterns that give ``module``'s fixed answers away, that ``text``
    shows (an answer read from the learner's own run is in no module: only its form is)."""
    hits = [a for a in _answer_texts() if a in text]
    for check, spec in answers.HIDDEN[module].items():
        if spec.get("answer"):
            hits += [f"{check}: {p}" for p in spec["text"] if re.search(p, text)]
    return hits


def _what_it_shows(name: str, value: object) -> list[str]:
    """The texts a learner sees for a public name: its value, its docstring, and what it
    returns when the notebook's own parameters are enough to call it."""
    if inspect.ismodule(value) or (inspect.isclass(value) and value.__module__ != name):
        return []  # the standard library, torch, the kit's other modules: not the key
    if not callable(value):
        return [repr(value)]
    texts = [inspect.getdoc(value) or ""]
    if name.startswith("check_") or getattr(value, "__module__", "") != name:
        return texts  # a verdict, or a function the module imported from elsewhere
    needed = [p.name for p in inspect.signature(value).parameters.values()
              if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]  # fmt: skip
    for args in NOTEBOOK_ARGS if needed else NOTEBOOK_ARGS[:1]:
        if set(needed) <= set(args):
            texts.append(repr(value(**{p: args[p] for p in needed})))
    return texts


@pytest.mark.parametrize("module", MODULES)
def test_no_public_name_of_an_exercise_module_is_an_answer(module):
    public = _public(module)
    assert sorted(set(public) & FORMER) == []
    assert [n for n in public if ANSWER_NAME.search(n)] == []


@pytest.mark.parametrize("module", MODULES)
def test_nothing_a_public_name_holds_returns_or_documents_shows_an_answer(
    module, tmp_path, monkeypatch
):
    monkeypatch.setenv("HPCPROF_RUNS_DIR", str(tmp_path))  # a name that writes, writes here
    imported = importlib.import_module(f"hpcprof_kit.exercises.{module}")
    found = {"(module docstring)": shows_an_answer(imported.__doc__ or "", module)}
    for name, value in _public(module).items():
        full = f"hpcprof_kit.exercises.{module}"
        found[name] = [h for t in _what_it_shows(full, value) for h in shows_an_answer(t, module)]
    assert {k: v for k, v in found.items() if v} == {}


def test_the_search_finds_an_answer_where_one_is():
    # what the modules exported before: nb01's answer function, nb07's docstring, nb09's key
    assert shows_an_answer(repr([12, 6, 448]), "nb01") == [
        "[12, 6, 448]",
        r"check_device_counts: \b448\b",
    ]
    assert "list:24-31:16-23:8-15:0-7" in shows_an_answer(
        '>>> check_polaris_list("list:24-31:16-23:8-15:0-7")\nCorrect', "nb07"
    )
    assert shows_an_answer(repr(answers.answer_key(WORKED_SEED)), "nb09") == [
        "{'data_loading': ('all', 'all'), 'straggler': ([0], [3, 5, 7])}"
    ]
    # a pattern run's key, or its rotating slow rank per step alone
    assert shows_an_answer(repr({0: 2, 4: 0, 5: 7}), "nb09") == ["{0: 2, 4: 0, 5: 7}"]
    assert shows_an_answer("Correct - every rank sits next to its GPU", "nb07") == []


def test_the_key_is_in_no_notebook_and_no_notebook_imports_it():
    fixed = {check: a if isinstance(a, str) else repr(a) for _, check, a in answers.course_key()}
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        sources = "\n".join(c.source for c in nb.cells)
        assert "hpcprof_kit.validate" not in sources, path.name
        stored = "\n".join(str(o) for c in nb.cells for o in c.get("outputs", []))
        own = [fixed[check] for _, check, _ in check_cells(nb) if check in fixed]
        assert [a for a in own if a in stored] == [], path.name


def test_each_check_still_accepts_the_key_s_answer(capsys):
    """The checks compute their truth privately now: each says "Correct" to the key's answer."""
    from hpcprof_kit.exercises import nb00, nb01, nb02, nb03, nb04, nb06, nb07, nb09

    flat, composite, units = answers.answer_device_counts()
    assert nb00.check_recorded_steps(answers.answer_recorded_steps()) is True
    assert nb01.check_device_counts(flat, composite, units) is True
    assert nb02.check_needs_a_human(answers.answer_needs_a_human()) is True
    assert nb03.check_rank(*answers.answer_rank()) is True
    assert nb04.check_second_trace(answers.answer_second_trace()) is True
    assert nb06.check_traced_ranks(answers.answer_traced_ranks()) is True
    assert nb07.check_polaris_list(answers.answer_polaris_list()) is True
    assert nb09.check_recorded(answers.answer_recorded()) is True
    assert nb09.check_diagnosis(answers.answer_key(WORKED_SEED), WORKED_SEED) is True
    assert nb09.check_diagnosis(answers.answer_key(PATTERN_SEED), PATTERN_SEED) is True
    replies = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("Correct")]
    assert replies == [
        "Correct - well done! With wait=1, warmup=1, active=2 the trace holds ProfilerStep#2 and #3.",
        "Correct - 12 tiles in FLAT mode, 6 GPUs in COMPOSITE mode, and 448 compute units per "
        "tile: 56 Xe cores x 8 EUs.",
        "Correct - lines [22, 27]: the device mask set inside the process (it belongs in the job "
        "script) and the cuDNN switch (oneDNN has none). The port lists both.",
        "Correct - rank 3 (PMI_RANK), local rank 1 (MPI_LOCALRANKID); SLURM_PROCID describes "
        "Hydra's proxy, not the rank.",
        "Correct - the second trace holds ProfilerStep#10 to #12.",
        "Correct - ranks [0, 12]: the first rank of each node, both below 13.",
        "Correct - every rank sits next to its GPU, no core shared or reserved.",
        "Correct - all 3 problems of the H100 run, with their ranks and steps.",
        "Correct - both problems of run 14, with their ranks and steps.",
        "Correct - both problems of run 0, with their ranks and steps.",
    ]
