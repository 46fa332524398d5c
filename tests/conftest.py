"""Fixtures shared by the test modules. Scheduler fixtures live in their own plugin files."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from must_have import missing, required
from slurm_cluster import cluster_env, slurm_cluster  # noqa: F401  (fixtures for every test)

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = REPO.parent / "shared" / "traces"

# Property tests explore at random on a laptop and run the same examples in CI, so a red CI
# run is about the change, not the draw; an example they find is kept as an explicit @example.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile("ci" if required() else "explore")


@pytest.fixture(autouse=True)
def no_rendezvous_leak():
    """Fail any test that leaves MASTER_ADDR/MASTER_PORT behind in the test process."""
    before = {k: os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT")}
    yield
    after = {k: os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT")}
    assert after == before, f"rendezvous variables leaked into the environment: {after}"


@pytest.fixture(autouse=True)
def isolated_runs(tmp_path, monkeypatch) -> Path:
    """Each test gets its own runs root ($HPCPROF_RUNS_DIR), and no workshop file applies
    unless the test writes one (a workshop.toml in the checkout must not change results)."""
    root = tmp_path / "runs"
    monkeypatch.setenv("HPCPROF_RUNS_DIR", str(root))
    monkeypatch.setenv("HPCPROF_WORKSHOP", "off")
    return root


@pytest.fixture(scope="session")
def mpiexec() -> str:
    """Hydra mpiexec from the mpich wheel in this environment (part of the 'local' extra)."""
    path = Path(sys.executable).parent / "mpiexec"
    found = str(path) if path.exists() else shutil.which("mpiexec")
    if not found:
        pytest.fail("mpiexec not found: install the kit with the 'local' extra (make env)")
    return found


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The real third-party GPU traces beside the project (present in CI, absent in a clone)."""
    if not SHARED_TRACES.is_dir():
        missing(
            f"real third-party traces not found at ../shared/traces (looked in {SHARED_TRACES})"
        )
    return SHARED_TRACES


@pytest.fixture
def kept_runs(request, isolated_runs: Path) -> Iterator[Path]:
    """The runs root of a test whose run directories are its evidence (fault tests): after the
    test they are copied to ``test-artifacts/runs/<test>/`` (gitignored), pass or fail."""
    yield isolated_runs
    target = REPO / "test-artifacts" / "runs" / request.node.name
    shutil.rmtree(target, ignore_errors=True)
    if isolated_runs.is_dir():
        shutil.copytree(isolated_runs, target, symlinks=True)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
