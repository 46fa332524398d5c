"""The docstring examples are the kit's reference: `make test` runs every one of them
(`pytest --doctest-modules hpcprof_kit`), and the examples stay runnable, not all `+SKIP`."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import hpcprof_kit

REPO = Path(__file__).resolve().parents[1]


def _modules() -> list[str]:
    names = ["hpcprof_kit"]
    for info in pkgutil.walk_packages(hpcprof_kit.__path__, "hpcprof_kit."):
        if not info.name.endswith("__main__"):
            names.append(info.name)
    return names


def _runnable(name: str) -> int:
    """Examples of a module that doctest runs (not skipped by a directive)."""
    finder = doctest.DocTestFinder()
    count = 0
    for test in finder.find(importlib.import_module(name)):
        count += sum(1 for ex in test.examples if not ex.options.get(doctest.SKIP))
    return count


def test_make_test_runs_the_docstring_examples_of_the_whole_package():
    recipe = (REPO / "Makefile").read_text().split("\ntest: env\n", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"pytest .*--doctest-modules hpcprof_kit\b", recipe), recipe


def test_the_reference_modules_keep_runnable_examples():
    """The modules whose examples used to be run from hand-kept lists still have examples that
    run: a module whose examples all turned into +SKIP would pass the doctest run silently."""
    for name in [
        "hpcprof_kit.affinity.plan", "hpcprof_kit.affinity.cpulist", "hpcprof_kit.ranks",
        "hpcprof_kit.jobs.backends.outcome", "hpcprof_kit.jobs.backends.slurm",
        "hpcprof_kit.jobs.backends.pbs", "hpcprof_kit.jobs.rundir", "hpcprof_kit.nsight.stats",
        "hpcprof_kit.nsight.plan", "hpcprof_kit.ondemand.dynolog", "hpcprof_kit.traces.table.loader",
        "hpcprof_kit.traces.read.patterns", "hpcprof_kit.traces.analyses.intervals", "hpcprof_kit.traces.table.order",
        "hpcprof_kit.traces.analyses.hta_compat", "hpcprof_kit.jobs.catalog", "hpcprof_kit.jobs.resolved",
    ]:  # fmt: skip
        assert _runnable(name) > 0, f"{name}: no docstring example runs"


def test_every_module_imports_for_the_doctest_run():
    for name in _modules():
        importlib.import_module(name)
