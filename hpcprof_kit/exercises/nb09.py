"""Notebook 09 exercise: diagnose a run you have not seen: which problems, on which ranks, in
which steps.

Each attendee gets a run of their own from the corpus of problem runs
(:mod:`hpcprof_kit.traces.corpus`): the seed comes from the user name unless the learner sets
one, and every seed's run has 2 or 3 problems. The check says, item by item, what is right and
what is not yet, with a hint where to look; it never names a problem the learner did not.

>>> seed = 14
>>> check_diagnosis({"data_loading": ("all", "all")}, seed)  # doctest: +NORMALIZE_WHITESPACE
data_loading: a problem of this run. Ranks: right. Steps: right.
1 more problem(s) in this run that your answer does not name.
Not yet. Hint: look at one rank against the others: the time each one computes per step.
False
>>> check_diagnosis(answer_key(seed), seed)
data_loading: a problem of this run. Ranks: right. Steps: right.
straggler: a problem of this run. Ranks: right. Steps: right.
Correct - both problems of run 14, with their ranks and steps.
True
"""

from __future__ import annotations

import getpass
import os
import re
import time
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import SpecError
from hpcprof_kit.exercises import feedback
from hpcprof_kit.traces.corpus import KINDS, Run, corpus_run

MAX_RANKS = 8  # enough to find one rank among many; small enough to load in seconds on a laptop
# Kinds the report may show that are symptoms of a planted cause, not a cause of their own.
SYMPTOMS = ("device_idle_host_bound", "exposed_communication", "short_kernels", "step_variance")
# Where each kind shows in a trace: the hint for a problem the learner has not named yet.
WHERE = {
    "straggler": "one rank against the others: the time each one computes per step",
    "data_loading": "the host's ops while the device waits, step by step",
    "synchronize_in_step": "the host's ops while the device waits, step by step",
    "launch_bound": "how many kernels a step launches, and how long each runs",
    "allocator_churn": "the runtime calls on the host (cuda*/ur*), how often and how long",
    "pageable_copy": "the memory copies: their names, sizes and bandwidth",
    "sync_copy": "the memory copies: their names, sizes and bandwidth",
    "no_tensor_cores": "the kernels that take most of the time: their names and input types",
    "small_collectives": "the collectives: how many a step, how big, how long",
    "low_bus_bandwidth": "the collectives: how many a step, how big, how long",
}
_FINDING = "|".join((*KINDS, *SYMPTOMS))
# What would give the answer away (tests/test_exercises_hidden.py): the report's findings as
# the command and the notebook print them, or a cell above the check that computes them.
HIDDEN = {
    "check_diagnosis": {
        "text": [rf"\[(?:{_FINDING})\] ranks \[", rf"(?:{_FINDING})\W{{0,40}}on ranks \["],
        "code": ["report", "find", "findings", "rank_steps", "stragglers", "answer_key",
                 "capstone_run", "corpus_run"],
        "from_run": "answer_patterns",
    },
    "check_recorded": {  # the section-4 report above it is of the attendee's own run
        "text": [r"straggler\W{0,40}\[1\]\W{0,40}\[3, 5\]"],
        "code": ["recorded_answer"],
        "answer": "recorded_answer",
    },
}  # fmt: skip


def attendee_seed(user: str | None = None) -> int:
    """A seed of the user's own (0-9999), the same every time for the same name.

    >>> attendee_seed("ada") == attendee_seed("ada") != attendee_seed("grace")
    True
    """
    name = user or os.environ.get("JUPYTERHUB_USER") or getpass.getuser()
    return zlib.crc32(name.encode()) % 10_000


def capstone_run(seed: int) -> Run:
    """The run of ``seed``: a corpus run of 4-8 ranks with 2 or 3 problems the trace can show
    (a third is drawn when one of two would leave nothing to see).

    >>> run = capstone_run(14)
    >>> run.ranks, run.steps, run.flavour, len(run.key())
    (5, 10, 'cuda', 2)
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise SpecError(f"seed={seed!r}: a whole number from 0; e.g. seed = 14")
    for n in (2 + seed % 2, 3):
        run = corpus_run(seed, problems=n, max_ranks=MAX_RANKS)
        if len(run.key()) >= 2:
            return run
    return run


def write_run(seed: int, root: str | os.PathLike[str] | None = None) -> Path:
    """Write the run of ``seed`` as Kineto traces into a fresh folder under the runs root:
    ``traces/`` (one file per rank) and ``reference/``, the same job without its problems (last
    week's healthy run). Returns the folder; an existing one is never written into.

    >>> import tempfile
    >>> folder = write_run(14, tempfile.mkdtemp())
    >>> folder.name.startswith("capstone_seed14_"), len(list((folder / "traces").iterdir()))
    (True, 5)
    """
    run = capstone_run(seed)
    folder = _fresh_folder(root, f"capstone_seed{seed}")
    run.write(folder / "traces")
    replace(run, problems=[]).write(folder / "reference")
    return folder


def _fresh_folder(root: str | os.PathLike[str] | None, name: str) -> Path:
    """A new folder ``<name>_<time>`` under the runs root, made here and now."""
    from hpcprof_kit.paths import runs_root

    base = runs_root(root).resolve()
    base.mkdir(parents=True, exist_ok=True)
    stem = f"{name}_{time.strftime('%Y%m%d-%H%M%S')}"
    for k in range(1000):
        folder = base / (stem if k == 0 else f"{stem}-{k}")
        try:
            os.mkdir(folder)  # atomic: a second notebook never writes into the first one's
        except FileExistsError:
            continue
        return folder
    raise SpecError(f"no free folder name under {base} for {stem}; remove old capstone runs")


def answer_key(seed: int) -> dict[str, tuple[Any, Any]]:
    """The instructors' key of ``seed``: kind -> (ranks, steps), ``"all"`` where a problem
    touches every rank or every step.

    >>> answer_key(14)
    {'data_loading': ('all', 'all'), 'straggler': ([0], [3, 5, 7])}
    """
    run = capstone_run(seed)
    key = {}
    for p in sorted(run.key(), key=lambda p: p["kind"]):
        ranks = "all" if p["ranks"] == list(range(run.ranks)) else p["ranks"]
        steps = "all" if p["steps"] == list(range(run.steps)) else p["steps"]
        key[p["kind"]] = (ranks, steps)
    return key


def answer_patterns(seed: int) -> list[str]:
    """What the cells above the check may not print for ``seed``'s run: its problems' names.

    >>> [bool(re.search(p, "data_loading, straggler")) for p in answer_patterns(14)]
    [True, True]
    >>> [bool(re.search(p, "data_loading_2")) for p in answer_patterns(14)]
    [False, False]
    """
    return [rf"(?<![\w]){re.escape(kind)}(?![\w])" for kind in answer_key(seed)]


def _expand(value: Any, every: range, what: str, kind: str) -> set[int]:
    if isinstance(value, str) and value.strip().lower() == "all":
        return set(every)
    try:
        items = {int(v) for v in ([value] if isinstance(value, int) else value)}
    except (TypeError, ValueError):
        raise SpecError(f"{kind}: {what}={value!r} must be 'all' or a list of numbers, "
                        f"e.g. [0, 3]") from None  # fmt: skip
    return items


def _pairs(answer: Any) -> dict[str, tuple[Any, Any]]:
    if not isinstance(answer, dict):
        raise SpecError(f"answer={answer!r} must be a dict of kind -> (ranks, steps), e.g. "
                        "{'launch_bound': ('all', [2, 3])}")  # fmt: skip
    pairs = {}
    for kind, where in answer.items():
        if isinstance(where, dict):
            where = (where.get("ranks", "all"), where.get("steps", "all"))
        if not isinstance(where, (tuple, list)) or len(where) != 2:
            raise SpecError(f"{kind}: {where!r} must be (ranks, steps), e.g. ('all', [2, 3])")
        pairs[str(kind)] = (where[0], where[1])
    return pairs


def _item(kind: str, ranks: Any, steps: Any, run: Run | _Recorded, key: dict
          ) -> tuple[bool, str, str]:  # fmt: skip
    """(right, the line about this item, the hint when it is not right)."""
    if kind in SYMPTOMS:
        line = f"{kind}: a symptom the report can show, not a cause."
        hint = f"{kind} is what another problem does to the step: name the problem that causes it"
        return False, line, hint
    if kind not in KINDS:
        line, hint = f"{kind}: not a problem this exercise knows.", f"name one of {KINDS}"
        return False, line, hint
    if kind not in key:
        line = f"{kind}: not a problem of this run."
        hint = f"check the numbers that made you suspect {kind} against the reference run"
        return False, line, hint
    want_r, want_s = key[kind]
    every_rank, every_step = _every(run)
    ok_r = _expand(ranks, every_rank, "ranks", kind) == set(want_r)
    ok_s = _expand(steps, every_step, "steps", kind) == set(want_s)
    verdict = {True: "right", False: "not yet"}
    line = f"{kind}: a problem of this run. Ranks: {verdict[ok_r]}. Steps: {verdict[ok_s]}."
    if kind == "straggler":
        hint = (
            "compare each rank's compute per step with the other ranks' in the same step; "
            "a straggler need not be slow in every step"
        )
    else:
        hint = (
            f"{kind} comes from code every rank runs: compare each rank and each step "
            "with the reference run, not only the first ones"
        )
    return ok_r and ok_s, line, hint


def check_diagnosis(answer: Any, seed: int) -> bool:
    """Check a diagnosis of ``seed``'s run: ``{kind: (ranks, steps)}``, each a list of numbers
    or ``"all"``. Prints a line per item (right or not yet) and one hint; names no problem
    the answer does not name."""
    run = capstone_run(seed)
    key = {p["kind"]: (p["ranks"], p["steps"]) for p in run.key()}
    return _check(answer, run, key, f"run {seed}")


def _check(answer: Any, run: Run | _Recorded, key: dict, name: str) -> bool:
    if not answer:
        return feedback(False, hint="write what you found as {kind: (ranks, steps)}; start "
                        "with the step time per rank and the reference run beside it")  # fmt: skip
    hints, right = [], 0
    for kind, (ranks, steps) in sorted(_pairs(answer).items()):
        ok, line, hint = _item(kind, ranks, steps, run, key)
        print(line)
        right += ok
        if not ok:
            hints.append(hint)
    missed = sorted(set(key) - set(_pairs(answer)))
    if missed:
        print(f"{len(missed)} more problem(s) in this run that your answer does not name.")
        hints.append(f"look at {WHERE[missed[0]]}.")
    both = "both" if len(key) == 2 else f"all {len(key)}"
    return feedback(
        not hints,
        hint=hints[0] if hints else "",
        well_done=f"Correct - {both} problems of {name}, with their ranks and steps.",
    )


# --- a real run: the pathologies app recorded on an H100 -------------------------------------
# tests/fixtures/traces/gpu_pathologies (README there): "unseen" has three problems, two ranks
# sharing the GPU with gloo; "straggler_none" is the same job without them, the reference.
RECORDED = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "traces" / "gpu_pathologies"


class _Recorded:
    """The recorded run's shape: 2 ranks, steps 1-7 recorded (step 0 was the warm-up)."""

    ranks = 2
    every_step = range(1, 8)
    key = {"pageable_copy": ([0, 1], list(range(1, 8))),
           "synchronize_in_step": ([0, 1], list(range(1, 8))),
           "straggler": ([1], [3, 5])}  # fmt: skip


def _every(run: Run | _Recorded) -> tuple[range, range]:
    if isinstance(run, _Recorded):
        return range(run.ranks), run.every_step
    return range(run.ranks), range(run.steps)


def recorded_run(root: str | os.PathLike[str] | None = None) -> Path:
    """Copy the H100 run into a fresh folder under the runs root: ``traces/`` (2 ranks, 3
    problems) and ``reference/`` (the same job without them). Needs the course's repository
    (the run is one of its test fixtures).

    >>> import tempfile
    >>> folder = recorded_run(tempfile.mkdtemp())
    >>> sorted(p.name for p in (folder / "traces").iterdir())
    ['trace-0-of-2.json.gz', 'trace-1-of-2.json.gz']
    """
    import shutil

    source = RECORDED / "unseen" / "traces"
    if not source.is_dir():
        raise SpecError(f"the recorded H100 run is not at {source}: it comes with the course's "
                        "repository (git clone), not with the installed package; run the "
                        "notebook from the repository")  # fmt: skip
    folder = _fresh_folder(root, "capstone_h100")
    for part, case in (("traces", "unseen"), ("reference", "straggler_none")):
        shutil.copytree(RECORDED / case / "traces", folder / part,
                        ignore=shutil.ignore_patterns(".*"))  # fmt: skip
    return folder


def recorded_answer() -> dict[str, tuple[Any, Any]]:
    """The instructors' key of the H100 run.

    >>> recorded_answer()["straggler"]
    ([1], [3, 5])
    """
    return {k: ("all" if r == [0, 1] else r, "all" if s == list(range(1, 8)) else s)
            for k, (r, s) in _Recorded.key.items()}  # fmt: skip


def check_recorded(answer: Any) -> bool:
    """Check a diagnosis of the H100 run, as :func:`check_diagnosis` does (steps 1-7 are the
    recorded ones: ``"all"`` means those).

    >>> check_recorded(recorded_answer())
    pageable_copy: a problem of this run. Ranks: right. Steps: right.
    straggler: a problem of this run. Ranks: right. Steps: right.
    synchronize_in_step: a problem of this run. Ranks: right. Steps: right.
    Correct - all 3 problems of the H100 run, with their ranks and steps.
    True
    """
    return _check(answer, _Recorded(), _Recorded.key, "the H100 run")
