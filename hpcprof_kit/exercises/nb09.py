"""Notebook 09 exercise: diagnose a run you have not seen: which problems, on which ranks, in
which steps.

Each attendee gets a run of their own from the corpus of problem runs
(:mod:`hpcprof_kit.traces.corpus`), or, for one seed in three, from the patterns that come and
go (:mod:`hpcprof_kit.traces.corpus_patterns`: a slow rank that changes from step to step,
slow steps on every rank, one rank's host stall): the seed comes from the user name unless the
learner sets one, and every seed's run has 2 or 3 problems. The check says, item by item, what
is right and what is not yet, with a hint where to look; it never names a problem the learner
did not.
The key of each run is the instructors' (:mod:`hpcprof_kit.validate.answers`), which no notebook
imports.

>>> check_diagnosis({}, 14)
Not yet. Hint: write what you found as {kind: (ranks, steps)}; start with the step time per rank and the reference run beside it
False
"""

from __future__ import annotations

import getpass
import os
import time
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import SpecError
from hpcprof_kit.exercises import feedback
from hpcprof_kit.traces.corpus import KINDS, PATTERNS, Run

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
    "rotating_straggler": "the compute per rank and step: which rank is slowest in each step",
    "slow_steps": "the step time of every rank, step by step, and what the long steps hold",
    "host_stall": "the step in which the others wait in the all-reduce, and who they wait for",
}
# one seed in PATTERN_EVERY draws its run from the patterns (seed 14, the worked run, does not)
PATTERN_EVERY = 3
PATTERN_DRAWS = 64  # pattern runs tried per seed for 2-3 patterns on 4-8 ranks


def attendee_seed(user: str | None = None) -> int:
    """A seed of the user's own (0-9999), the same every time for the same name.

    >>> attendee_seed("ada") == attendee_seed("ada") != attendee_seed("grace")
    True
    """
    name = user or os.environ.get("JUPYTERHUB_USER") or getpass.getuser()
    return zlib.crc32(name.encode()) % 10_000


def _capstone_run(seed: int) -> Run:
    """The run of ``seed``: a corpus run of 4-8 ranks with 2 or 3 problems the trace can show
    (a third is drawn when one of two would leave nothing to see), or for a seed that
    :data:`PATTERN_EVERY` divides, a run of 2 or 3 patterns. Private: its ``key()`` is the
    answer (instructors: ``hpcprof_kit.validate.answers.answer_key``).

    >>> run = _capstone_run(14)
    >>> run.ranks, run.steps, run.flavour, len(run.key())
    (5, 10, 'cuda', 2)
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise SpecError(f"seed={seed!r}: a whole number from 0; e.g. seed = 14")
    if seed % PATTERN_EVERY == 0:
        return _pattern_run(seed)
    from hpcprof_kit.traces.corpus import corpus_run

    for n in (2 + seed % 2, 3):
        run = corpus_run(seed, problems=n, max_ranks=MAX_RANKS)
        if len(run.key()) >= 2:
            return run
    return run


def _pattern_run(seed: int) -> Run:
    """The first of the pattern runs ``PATTERN_DRAWS * seed + k`` (k = 0, 1, ...) with 2 or 3
    patterns on 4 ranks or more, and no host stall in a step of the rotating slow rank (the
    others would wait for the stall, and the slow rank would cost nothing): the same seed, the
    same run."""
    from hpcprof_kit.traces.corpus_patterns import pattern_run

    for k in range(PATTERN_DRAWS):
        run = pattern_run(PATTERN_DRAWS * seed + k, max_ranks=MAX_RANKS, clean_share=0.0)
        key = {p["kind"]: p for p in run.key()}
        stalled = set(key["host_stall"]["steps"]) if "host_stall" in key else set()
        rotating = set(key["rotating_straggler"]["steps"]) if "rotating_straggler" in key else set()
        if run.ranks >= 4 and len(key) >= 2 and not stalled & rotating:
            return run
    raise SpecError(f"seed={seed}: no run with 2 patterns in {PATTERN_DRAWS} draws; "
                    "pick another seed")  # fmt: skip


def write_run(seed: int, root: str | os.PathLike[str] | None = None) -> Path:
    """Write the run of ``seed`` as Kineto traces into a fresh folder under the runs root:
    ``traces/`` (one file per rank) and ``reference/``, the same job without its problems (last
    week's healthy run). Returns the folder; an existing one is never written into.

    >>> import tempfile
    >>> folder = write_run(14, tempfile.mkdtemp())
    >>> folder.name.startswith("capstone_seed14_"), len(list((folder / "traces").iterdir()))
    (True, 5)
    """
    run = _capstone_run(seed)
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


def _expand(value: Any, every: range, what: str, kind: str) -> set[int]:
    if isinstance(value, str) and value.strip().lower() == "all":
        return set(every)
    try:
        items = {int(v) for v in ([value] if isinstance(value, int) else value)}
    except (TypeError, ValueError):
        raise SpecError(f"{kind}: {what}={value!r} must be 'all' or a list of numbers, "
                        f"e.g. [0, 3]") from None  # fmt: skip
    return items


def _pairs(answer: Any) -> dict[str, Any]:
    """Each item's (ranks, steps), or a rotating straggler's ``{step: rank}`` as given."""
    if not isinstance(answer, dict):
        raise SpecError(f"answer={answer!r} must be a dict of kind -> (ranks, steps), e.g. "
                        "{'launch_bound': ('all', [2, 3])}")  # fmt: skip
    pairs = {}
    for kind, where in answer.items():
        own = isinstance(where, dict) and not {"ranks", "steps"} & set(where)
        if own and str(kind) == "rotating_straggler":  # {step: rank, ...}
            pairs[str(kind)] = where
            continue
        if isinstance(where, dict):
            where = (where.get("ranks", "all"), where.get("steps", "all"))
        if not isinstance(where, (tuple, list)) or len(where) != 2:
            raise SpecError(
                f"{kind}: {where!r} must be (ranks, steps), e.g. ('all', [2, 3])"
                + (", or {step: rank, ...}" if kind == "rotating_straggler" else "")
            )
        pairs[str(kind)] = (where[0], where[1])
    return pairs


def _by_step(where: Any) -> dict[int, int] | None:
    """A rotating straggler's slow rank per step: ``{step: rank}``, or (ranks, steps) of one
    rank per step in the same order; None when the answer pairs no rank with its step."""
    if isinstance(where, dict):
        try:
            return {int(s): int(r) for s, r in where.items()}
        except (TypeError, ValueError):
            raise SpecError(f"rotating_straggler: {where!r} must be {{step: rank, ...}}, "
                            "e.g. {2: 1, 5: 3}") from None  # fmt: skip
    ranks, steps = where
    if (
        isinstance(ranks, (list, tuple))
        and isinstance(steps, (list, tuple))
        and len(ranks) == len(steps)
    ):
        try:
            return {int(s): int(r) for s, r in zip(steps, ranks, strict=True)}
        except (TypeError, ValueError):
            return None
    return None


_HINTS = {
    "straggler": "compare each rank's compute per step with the other ranks' in the same step; "
    "a straggler need not be slow in every step",
    "rotating_straggler": "a rotating straggler's slow rank changes from step to step: in each "
    "step compare the ranks' compute, and give each slow step with its own slow rank, as "
    "{step: rank, ...}",
    "slow_steps": "slow steps are slow on every rank at once: find the steps whose time stands "
    "out on all ranks, against the other steps and the reference run",
    "host_stall": "a host stall is one rank's host stopping while its device idles: its "
    "compute is not slower, but the others wait for it in the all-reduce of that step",
}


def _item(kind: str, where: Any, run: Run | _Recorded, key: dict) -> tuple[bool, str, str]:
    """(right, the line about this item, the hint when it is not right)."""
    if kind in SYMPTOMS:
        line = f"{kind}: a symptom the report can show, not a cause."
        hint = f"{kind} is what another problem does to the step: name the problem that causes it"
        return False, line, hint
    if kind not in (*KINDS, *PATTERNS):
        line, hint = (
            f"{kind}: not a problem this exercise knows.",
            f"name one of {KINDS + PATTERNS}",
        )
        return False, line, hint
    if kind not in key:
        line = f"{kind}: not a problem of this run."
        hint = f"check the numbers that made you suspect {kind} against the reference run"
        if kind == "straggler" and "rotating_straggler" in key:
            hint = "a straggler is the same rank in every step it slows: check which rank is "
            hint += "the slowest in each of those steps"
        elif kind in ("sync_copy", "pageable_copy") and "slow_steps" in key:
            hint = f"{kind} copies in every step: check which steps hold the copy you saw"
        return False, line, hint
    verdict = {True: "right", False: "not yet"}
    hint = _HINTS.get(kind, f"{kind} comes from code every rank runs: compare each rank and "
                      "each step with the reference run, not only the first ones")  # fmt: skip
    every_rank, every_step = _every(run)
    if kind == "rotating_straggler":
        want = key[kind]
        by_step = _by_step(where)
        if by_step is None:
            ok_s = _expand(where[1], every_step, "steps", kind) == set(want)
            line = (f"{kind}: a problem of this run. Steps: {verdict[ok_s]}. Slow rank of each "
                    "step: write it as {step: rank, ...}.")  # fmt: skip
            return False, line, hint
        ok_s, ok_r = set(by_step) == set(want), by_step == want
        line = (f"{kind}: a problem of this run. Steps: {verdict[ok_s]}. Slow rank of each "
                f"step: {verdict[ok_r]}.")  # fmt: skip
        return ok_r, line, hint
    ranks, steps = where
    want_r, want_s = key[kind]
    ok_r = _expand(ranks, every_rank, "ranks", kind) == set(want_r)
    ok_s = _expand(steps, every_step, "steps", kind) == set(want_s)
    line = f"{kind}: a problem of this run. Ranks: {verdict[ok_r]}. Steps: {verdict[ok_s]}."
    return ok_r and ok_s, line, hint


def _key(run: Run) -> dict[str, Any]:
    """``run``'s key as the check reads it: kind -> (ranks, steps), a rotating straggler's
    ``{step: rank}``."""
    return {p["kind"]: (p["slow_rank_by_step"] if p["kind"] == "rotating_straggler"
                        else (p["ranks"], p["steps"])) for p in run.key()}  # fmt: skip


def check_diagnosis(answer: Any, seed: int) -> bool:
    """Check a diagnosis of ``seed``'s run: ``{kind: (ranks, steps)}``, each a list of numbers
    or ``"all"`` (a rotating straggler: ``{step: rank, ...}``). Prints a line per item (right
    or not yet) and one hint; names no problem the answer does not name."""
    run = _capstone_run(seed)
    return _check(answer, run, _key(run), f"run {seed}")


def _check(answer: Any, run: Run | _Recorded, key: dict, name: str) -> bool:
    if not answer:
        return feedback(False, hint="write what you found as {kind: (ranks, steps)}; start "
                        "with the step time per rank and the reference run beside it")  # fmt: skip
    hints, right = [], 0
    for kind, where in sorted(_pairs(answer).items()):
        ok, line, hint = _item(kind, where, run, key)
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


def check_recorded(answer: Any) -> bool:
    """Check a diagnosis of the H100 run, as :func:`check_diagnosis` does (steps 1-7 are the
    recorded ones: ``"all"`` means those).

    >>> check_recorded({"launch_bound": ("all", "all")})
    launch_bound: not a problem of this run.
    3 more problem(s) in this run that your answer does not name.
    Not yet. Hint: check the numbers that made you suspect launch_bound against the reference run
    False
    """
    return _check(answer, _Recorded(), _Recorded.key, "the H100 run")
