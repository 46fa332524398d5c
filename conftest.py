"""Session set-up shared by tests/ and the nbval run over notebooks/."""

import os
import shutil
import sys
import tempfile
from pathlib import Path

# Subprocesses (mpiexec, hpcprof-kit, jupyter) come from the interpreter's own environment.
_BIN = str(Path(sys.executable).parent)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _BIN + os.pathsep + os.environ.get("PATH", "")

# Runs started by tests and notebooks never land in the source tree. The folder is this run's:
# removed when the run passes (a notebook's runs are 150 MB), kept and named when it fails.
# xdist's workers and a pytest a test starts inherit it, and leave it to the run that made it.
_MADE_RUNS_DIR = None
if "HPCPROF_RUNS_DIR" not in os.environ:
    _MADE_RUNS_DIR = tempfile.mkdtemp(prefix="hpcprof-test-runs-")
    os.environ["HPCPROF_RUNS_DIR"] = _MADE_RUNS_DIR

# Trace cache copies go to this run's folder too, not the user's cache folder (read.cache).
if _MADE_RUNS_DIR is not None and "HPCPROF_TRACE_CACHE_DIR" not in os.environ:
    os.environ["HPCPROF_TRACE_CACHE_DIR"] = os.path.join(_MADE_RUNS_DIR, "trace-cache")

# Kineto's USDT stderr lines break stored-output comparisons; silence them before torch loads.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

# `--cpu-report FILE`: each test's wall and CPU seconds, for finding where the suite's time goes.
pytest_plugins = ("tests.cpu_time",)


def pytest_addoption(parser):
    parser.addoption(
        "--quick",
        action="store_true",
        help="the inner loop (make test-quick): leave out every test that starts jobs, ranks, "
        "a scheduler or a browser; `make test` runs them all",
    )


def pytest_sessionfinish(session, exitstatus):
    if _MADE_RUNS_DIR is None or not os.path.isdir(_MADE_RUNS_DIR):
        return
    if exitstatus in (0, 5):  # passed, or nothing ran
        shutil.rmtree(_MADE_RUNS_DIR, ignore_errors=True)
    else:
        print(f"\nthe runs the tests and notebooks started are kept in {_MADE_RUNS_DIR}")


def pytest_collection_modifyitems(config, items):
    """Docstring examples that need torch or mpi4py are skipped where those are absent (a
    laptop without the 'local' extra), never in CI (HPCPROF_REQUIRE_ALL=1 runs them and fails)."""
    import importlib.util

    import pytest

    absent = [m for m in ("torch", "mpi4py") if importlib.util.find_spec(m) is None]
    if not absent or os.environ.get("HPCPROF_REQUIRE_ALL", "") not in ("", "0"):
        return
    for item in items:
        if type(item).__name__ != "DoctestItem":
            continue
        text = Path(str(item.fspath)).read_text(errors="replace")
        needs = [m for m in absent if f"import {m}" in text or f"{m}." in text]
        if needs:
            item.add_marker(pytest.mark.skip(reason=f"needs {', '.join(needs)} (not installed)"))
