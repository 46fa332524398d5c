"""The exercises' answer key, for instructors and the tests: each check's answer for its
notebook's own parameters, the truth of a learner's own run, and what would give an answer away
in a notebook (``HIDDEN``).

No notebook imports this module, and the modules the notebooks import checks from
(``hpcprof_kit.exercises.nbNN``) export no answer: each check computes its truth privately, and
this key reads it from there. ``hpcprof-kit validate --answers [--seed N]`` prints the key.

>>> answer_needs_a_human()
[22, 27]
>>> answer_key(14)
{'data_loading': ('all', 'all'), 'straggler': ([0], [3, 5, 7])}
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from hpcprof_kit.exercises.nb09 import SYMPTOMS
from hpcprof_kit.traces.corpus import KINDS, PATTERNS

_FINDING = "|".join((*KINDS, *PATTERNS, *SYMPTOMS))

# What would give each check's answer away in its notebook, by exercise module and check
# (tests/test_exercises_hidden.py, tests/nbval_hidden.py): "text" patterns no markdown or output
# may match, "code" names no code cell above the check may use, "answer" the function here that
# gives the answer for the notebook's own parameters, "from_run" the one that gives the
# learner's own answer as patterns (its parameters are names of the notebook's variables).
HIDDEN: dict[str, dict[str, dict[str, Any]]] = {
    "nb00": {
        # the schedule table, the step table and the step numbers of the learner's own run
        "check_recorded_steps": {
            "text": [r"ProfilerStep#\d", r"\[2, 3\]", r"steps? 2 and 3"],
            "code": ["format_schedule", "schedule_steps", "schedule_explorer", "recorded_steps",
                     "steps_in_run", "rank_steps", "step_breakdown"],
            "from_run": "recorded_steps_patterns",
            "answer": "answer_recorded_steps",
        },
    },
    "nb01": {
        "check_device_counts": {
            "text": [r"\b12\s+(torch\s+)?(devices|tiles|ranks)\b", r"\b6\s+(torch\s+)?devices\b",
                     r"(?i)\bflat\b[^\d\n]{0,40}\b12\b", r"(?i)\bcomposite\b[^\d\n]{0,40}\b6\b",
                     r"\b448\b", r"\b56\s*[x*]\s*8\b"],
            "code": ["_device_counts", "HIERARCHY_NOTES", "_tile_compute_units",
                     "_EUS_PER_XE_CORE"],
            "answer": "answer_device_counts",
        },
        "check_my_devices": {
            "text": [r"count = acc\.device_count\(\)", r"acc\.device_count\(\)  # filled"],
            "code": [],
            "answer": "answer_my_devices",
        },
    },
    "nb02": {
        "check_needs_a_human": {
            "text": [r"\.py:\d+: ", r"# needs a human:", r"not ported \(", r"(?i)\blines? 22\b",
                     r"\b22 and 27\b", r"\[22, 27\]"],
            "code": ["port_file", "port_source", "not_ported", "_needs_a_human", "report"],
            "answer": "answer_needs_a_human",
        },
    },
    "nb03": {
        # the puzzle read by the kit's own reader, or the answer's words
        "check_rank": {
            "text": [r"rank 3\b[^\n]*local rank 1\b", r"rank=3\b[^\n]*local_rank=1\b"],
            "code": ["ranks_from_env(PUZZLE_ENV"],
            "answer": "answer_rank",
        },
        "check_pbs_header": {  # the directives the task asks for, as the site spells them
            "text": [r"filesystems=home:flare\b", r"filesystems=flare:home\b",
                     r"filesystems=home:eagle\b", r"filesystems=eagle:home\b",
                     r"select=2:system=polaris\b", r"place=scatter\b"],
            "code": [],
            "answer": "answer_pbs_headers",
        },
        "check_my_rendezvous": {
            "text": [r"backend = \{\"xpu\": \"xccl\"", r"get\(device\.type, \"gloo\"\)"],
            "code": [],
            "answer": "answer_my_rendezvous",
        },
    },
    "nb04": {
        # the steps themselves, or a schedule table or strip drawn for the exercise's schedule
        "check_second_trace": {
            "text": [r"\b10\D{1,6}11\D{1,6}12\b", r"#10 to #12"],
            "code": ["**EXERCISE", "_steps_in_trace("],
            "answer": "answer_second_trace",
        },
        "check_every_cycle_kept": {  # a handler whose file name differs per cycle
            "text": [r"export_chrome_trace\([^\n]*step_num", r"on_trace_ready\s*=\s*tensorboard_trace_handler\("],
            "code": ["tensorboard_trace_handler("],
            "answer": "answer_every_cycle",
        },
        "check_my_trace": {
            "text": [r"ProfilerStep\s*\[3, 4\]", r"ProfilerStep#3\b[^\n]*#4\b", r"\b3 and 4\b"],
            "code": ["recorded_steps(", "format_schedule(", "plot_schedule("],
            "answer": "answer_my_trace",
        },
    },
    "nb05": {
        # the learner's own run's count and total, as a table above the check would print them
        "check_same_name_query": {
            "text": [],
            "code": ["same_name(", "plot_same_name(", "top_ops(", "user_ranges("],
            "from_run": "same_name_query_patterns",
        },
        # the verdict sentence itself, or a cell that computes it
        "check_compiled_verdict": {
            "text": [r"within noise \(", r"is faster than \S+: median", r"larger than the noise\."],
            "code": ["noise_verdict", "difference"],
        },
    },
    "nb06": {
        "check_traced_ranks": {
            "text": [r"\[0,\s*12\]", r"\b0 and 12\b", r"(?i)ranks? 0 and 12\b"],
            "code": ["RANKCUTOFF=13", "rankcutoff=13"],
            "answer": "answer_traced_ranks",
        },
        # any set meeting each question's needs is right: nothing single to hide
        "check_ranks_to_trace": {
            "text": [r"my_profrank, my_rankcutoff = \d+, \d+", r"\"which node is slow\": \[\d",
                     r"\"cross-node all-reduce wait\": \[\d"],
            "code": [],
            "answer": "answer_ranks_to_trace",
        },
    },
    "nb07": {
        "check_polaris_list": {
            "text": [r"list:24-31:16-23:8-15:0-7"],
            "code": ['plan_for("polaris", 4, "auto")', "plan_for('polaris', 4, 'auto')"],
            "answer": "answer_polaris_list",
        },
        # the plans' findings, the comparison's verdict column, the CPUs each rank got
        "check_cpus_per_rank": {
            "text": [r"unbound: rank \d", r"\s+unbound\s+\d", r"cpus=\S+ online="],
            "code": ["side_by_side", "exp.comparison", "exp.report", "_cpus_per_rank",
                     "plan_for(system"],
        },
    },
    "nb08": {
        # a table with a comm_share column, or a cell that computes or draws it
        "check_comm_share": {
            "text": [r"comm_share", r"comm share"],
            "code": ["compute_vs_comm", "plot_compute_vs_comm", "step_breakdown", "comm_share"],
        },
    },
    "nb09": {
        # the report's findings as the command and the notebook print them
        "check_diagnosis": {
            "text": [rf"\[(?:{_FINDING})\] ranks \[", rf"(?:{_FINDING})\W{{0,40}}on ranks \["],
            "code": ["report", "find", "findings", "rank_steps", "stragglers", "answer_key",
                     "_capstone_run", "corpus_run", "pattern_run", "time_lost"],
            "from_run": "diagnosis_patterns",
        },
        "check_recorded": {  # the section-4 report above it is of the attendee's own run
            "text": [r"straggler\W{0,40}\[1\]\W{0,40}\[3, 5\]"],
            "code": ["answer_recorded"],
            "answer": "answer_recorded",
        },
    },
}  # fmt: skip


def _nb(name: str):
    return importlib.import_module(f"hpcprof_kit.exercises.{name}")


def answer_recorded_steps() -> list[int]:
    """Notebook 00: the steps its schedule (wait=1, warmup=1, active=2, repeat=1) records."""
    return _nb("nb00")._recorded_steps(wait=1, warmup=1, active=2, repeat=1, steps=6)


def recorded_steps_patterns(job) -> list[str]:
    """Notebook 00: the learner's own run's steps as text patterns, which may not show above
    the check."""
    per_rank = _nb("nb00")._steps_in_run(job)
    steps = sorted({s for found in per_rank.values() for s in found})
    return [rf"ProfilerStep#{s}\b" for s in steps] + [re.escape(repr(steps))]


def answer_device_counts() -> list[int]:
    """Notebook 01: FLAT devices, COMPOSITE devices and one tile's compute units."""
    counts = _nb("nb01")._device_counts("aurora")
    return [counts["FLAT"], counts["COMPOSITE"], _nb("nb01")._tile_compute_units()]


def answer_my_devices() -> str:
    """Notebook 01: the line that fills the blank of ``my_devices.py``."""
    return "count = acc.device_count()"


def answer_needs_a_human() -> list[int]:
    """Notebook 02: the line numbers the XPU port leaves to a human."""
    return _nb("nb02")._needs_a_human()


def answer_rank() -> list[int]:
    """Notebook 03: the puzzle's rank and local rank, as the kit reads them."""
    from hpcprof_kit.ranks import ranks_from_env

    info = ranks_from_env(_nb("nb03").PUZZLE_ENV, use_mpi=False)
    return [info.rank, info.local_rank]


def answer_pbs_headers() -> dict[str, str]:
    """The ``#PBS`` header of notebook 03's task, per site (``-A`` is the learner's project)."""
    task = _nb("nb03").PBS_TASK
    headers = {}
    for system, fs in _nb("nb03").PROJECT_FS.items():
        chunk = ":system=polaris" if system == "polaris" else ""
        headers[system] = (f"#PBS -A MyProject\n#PBS -q {task['queue']}\n"
                           f"#PBS -l select={task['nodes']}{chunk}\n#PBS -l place=scatter\n"
                           f"#PBS -l walltime=00:{task['minutes']:02d}:00\n"
                           f"#PBS -l filesystems=home:{fs}\n")  # fmt: skip
    return headers


def answer_my_rendezvous() -> str:
    """Notebook 03: the line that fills the blank of ``my_ddp.py``."""
    return 'backend = {"xpu": "xccl", "cuda": "nccl"}.get(device.type, "gloo")'


def answer_second_trace() -> list[int]:
    """Notebook 04: the steps in the second trace of the exercise's schedule."""
    nb04 = _nb("nb04")
    return nb04._steps_in_trace(1, **nb04.EXERCISE)


def answer_my_trace() -> list[int]:
    """Notebook 04: the steps ``my_train.py``'s schedule records (the check reads them from
    the learner's own traces)."""
    nb04 = _nb("nb04")
    return nb04._steps_in_trace(0, **nb04.MY_SCHEDULE)


def answer_every_cycle() -> str:
    """Notebook 04: a handler that keeps every cycle (``tensorboard_trace_handler(str(cycles_dir))``
    keeps them too)."""
    return 'prof.export_chrome_trace(str(cycles_dir / f"trace-{prof.step_num}.json"))'


def same_name_query_patterns(merged) -> list[str]:
    """Notebook 05: the Perfetto task's count and total (ms) on the learner's merged trace, as
    a cell above the check would print them."""
    count, total = _nb("nb05")._same_name_truth(merged, "aten::linear")
    return [rf"aten::linear\W[^\n]{{0,60}}\b{count}\b", re.escape(f"{total:.3f}")]


def answer_traced_ranks() -> list[int]:
    """Notebook 06: the ranks unitrace traces on 2 nodes x 12 ranks, PROFRANK=0, RANKCUTOFF=13."""
    from hpcprof_kit.tracer_ranks import traced_ranks

    return traced_ranks(world_size=24, ranks_per_node=12, profrank=0, rankcutoff=13)


def answer_ranks_to_trace() -> dict[str, list[int]]:
    """Notebook 06: one right choice of many (any set meeting each question's needs), and the
    wrapper's PROFRANK, RANKCUTOFF for the first question."""
    return {"which node is slow": [0, 4, 8, 12], "cross-node all-reduce wait": [0, 4],
            "PROFRANK, RANKCUTOFF": [0, 16]}  # fmt: skip


def answer_polaris_list() -> str:
    """Notebook 07: the 4-rank Polaris list with rank i next to GPU i (the kit's own plan,
    ``plan_for("polaris", 4, "auto")``, adds each core's hyperthread to it)."""
    return "list:24-31:16-23:8-15:0-7"


def cpus_per_rank(experiment) -> dict[str, int | list[int]]:
    """Notebook 07: the CPUs each plan's ranks got in the learner's own experiment."""
    return _nb("nb07")._cpus_per_rank(experiment)


def comm_share(table, dtype: str = "float32", world_size: int = 2) -> float:
    """Notebook 08: the communication share of the learner's own table."""
    return _nb("nb08")._comm_share(table, dtype, world_size)


def answer_key(seed: int) -> dict[str, Any]:
    """Notebook 09: the key of ``seed``'s run: kind -> (ranks, steps), ``"all"`` where a
    problem touches every rank or every step; a rotating straggler's ``{step: rank}`` (the
    slow rank of each of its steps).

    >>> answer_key(0)
    {'rotating_straggler': {0: 2, 4: 0, 5: 7}, 'slow_steps': ('all', [2, 5])}
    """
    run = _nb("nb09")._capstone_run(seed)
    key = {}
    for p in sorted(run.key(), key=lambda p: p["kind"]):
        if p["kind"] == "rotating_straggler":
            key[p["kind"]] = dict(p["slow_rank_by_step"])
            continue
        ranks = "all" if p["ranks"] == list(range(run.ranks)) else p["ranks"]
        steps = "all" if p["steps"] == list(range(run.steps)) else p["steps"]
        key[p["kind"]] = (ranks, steps)
    return key


def diagnosis_patterns(seed: int) -> list[str]:
    """Notebook 09: what the cells above the check may not print for ``seed``'s run: its
    problems' names.

    >>> [bool(re.search(p, "data_loading, straggler")) for p in diagnosis_patterns(14)]
    [True, True]
    >>> [bool(re.search(p, "data_loading_2")) for p in diagnosis_patterns(14)]
    [False, False]
    """
    return [rf"(?<![\w]){re.escape(kind)}(?![\w])" for kind in answer_key(seed)]


def answer_recorded() -> dict[str, tuple[Any, Any]]:
    """Notebook 09: the key of the run recorded on an H100 (steps 1-7 recorded)."""
    recorded = _nb("nb09")._Recorded
    return {k: ("all" if r == [0, 1] else r, "all" if s == list(recorded.every_step) else s)
            for k, (r, s) in recorded.key.items()}  # fmt: skip


def course_key() -> list[tuple[str, str, Any]]:
    """(exercise module, check, answer) of every check whose answer does not depend on the
    learner's run, in the notebooks' order.

    >>> course_key()[0]
    ('nb00', 'check_recorded_steps', [2, 3])
    """
    return [(module, check, globals()[spec["answer"]]())
            for module, checks in HIDDEN.items()
            for check, spec in checks.items() if spec.get("answer")]  # fmt: skip


def key_text(seed: int | None = None) -> str:
    """The key as ``hpcprof-kit validate --answers`` prints it: a line per check, then
    notebook 09's run of ``seed`` when one is given.

    >>> print(key_text(14).splitlines()[-1])
    nb09 check_diagnosis (seed 14): {'data_loading': ('all', 'all'), 'straggler': ([0], [3, 5, 7])}
    """
    lines = [f"{module} {check}: {answer!r}" for module, check, answer in course_key()]
    if seed is not None:
        lines.append(f"nb09 check_diagnosis (seed {seed}): {answer_key(seed)!r}")
    return "\n".join(lines)
