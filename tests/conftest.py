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
from train_run import train_run  # noqa: F401  (one 2-rank train run the tests share)

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = REPO.parent / "shared" / "traces"

# Property tests explore at random on a laptop and run the same examples in CI, so a red CI
# run is about the change, not the draw; an example they find is kept as an explicit @example.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile("ci" if required() else "explore")


# What `--quick` (make test-quick) leaves out: tests that start jobs, ranks, a scheduler or a
# browser, known by their markers or by the fixtures that start those things.
HEAVY_MARKERS = ("slurm", "mpi", "browser", "jobs")
HEAVY_FIXTURES = frozenset({"mpiexec", "slurm_cluster", "cluster_env", "torch_trace", "train_run"})
# Modules (or tests, as module::name) that start such things without those markers or fixtures,
# and why.
QUICK_LEAVES_OUT = {
    "test_affinity_profiles.py": "runs the binding experiment as local jobs",
    "test_apps.py": "runs the apps with torch",
    "test_cli_devices_port.py": "starts the installed command, which imports torch",
    "test_cli_traces.py": "starts the installed command on recorded traces",
    "test_demo.py": "runs the demo job",
    "test_dist_join.py": "starts processes that make a process group",
    "test_dist_rendezvous.py": "waits out rendezvous time-outs in subprocesses",
    "test_doctor_cli.py": "starts the installed command, which imports torch",
    "test_dynolog_standin.py": "runs the dynolog recipe with its stand-in daemons",
    "test_env_recipes.py": "builds virtual environments",
    "test_headless_recipe.py::test_headless_recipe_runs_notebook_02_on_a_fresh_clone": "executes a notebook with nbconvert",
    "test_hta_crosscheck.py": "builds HTA's own environment and runs it",
    "test_hta_idle_launch.py": "runs HTA itself",
    "test_jobs_cli.py": "submits local jobs through the command",
    "test_jobs_concurrency.py": "submits jobs from several processes",
    "test_jobs_local.py": "runs local jobs",
    "test_jobs_progress.py": "runs local jobs",
    "test_nsight_stats_real.py": "runs the real nsys under mpiexec",
    "test_ondemand.py": "traces a running training process",
    "test_porting_versions.py::test_the_agnostic_port_of_max_memory_allocated_runs_on_this_torch": "runs the ported script with torch",
    "test_preflight_standin.py": "runs the preflight in a clean login shell on the stand-in",
    "test_sweep.py": "runs sweeps as local jobs",
    "test_tracer_options.py": "runs local jobs under tracer stand-ins",
    "test_traces_mpi_summary.py::test_combined_summaries_equal_the_analyses_of_the_whole_table": "analyses a 64-rank run twice",
    "test_traces_scan.py::test_random_traces_read_the_same_either_way": "a long property test",
    "test_validate.py": "executes the notebooks",
}


def _left_out_by_name(item) -> bool:
    name = item.path.name
    return name in QUICK_LEAVES_OUT or any(
        key.startswith(name + "::") and item.name.split("[")[0] == key.split("::")[1]
        for key in QUICK_LEAVES_OUT
    )


# Under pytest-xdist (`make test` runs `-n 3 --dist loadgroup`) a module's tests stay on one
# worker, so its module fixtures are made once; tests that share a machine-wide resource share
# one group: one Slurm cluster per run (job ids would repeat across two), one nsys at a time
# (its agents are machine-wide), one JupyterLab and Chromium, one shared train run.
# Notebook 05's compile tests run just before its notebook, in its group: Inductor's cache is
# keyed by the venv's path, so a fresh clone compiles cold once, and the notebook's two
# compiled variants (and the browser's run of it, if later) find the same graphs compiled.
SHARED_GROUPS = {"slurm": "slurm", "browser": "browser"}
SHARED_GROUP_FIXTURES = {"slurm_cluster": "slurm", "cluster_env": "slurm", "train_run": "train_run"}
SHARED_GROUP_MODULES = {
    "test_nsight_stats_real.py": "nsys",
    "test_notebook05_compile.py": "05_reading_traces.ipynb",
}


def _xdist_group(item) -> str:
    for marker, group in SHARED_GROUPS.items():
        if item.get_closest_marker(marker):
            return group
    for fixture in getattr(item, "fixturenames", ()):
        if fixture in SHARED_GROUP_FIXTURES:
            return SHARED_GROUP_FIXTURES[fixture]
    return SHARED_GROUP_MODULES.get(item.path.name, item.path.name)


def pytest_xdist_node_collection_finished(node, ids):
    """Stop, never degrade silently, where `--dist loadgroup` does not group: pytest 9.2's
    structured test ids drop the group xdist 3.8 writes into them (pytest-xdist#1386), and two
    Slurm clusters, JupyterLabs or nsys sessions would then run at once."""
    if node.config.getoption("dist") == "loadgroup" and ids and not any("@" in i for i in ids):
        pytest.exit(
            f"--dist loadgroup is not grouping tests under pytest {pytest.__version__}: the "
            "xdist_group names never reached the test ids (pytest-xdist#1386); install the "
            "pytest that env/local/constraints.txt pins (make clean-env test)",
            returncode=4,
        )


# The groups that take minutes (seconds of one worker in a fresh clone's `make test`), started
# first so that no long group is left for the end while the other worker idles; xdist would
# order the groups by their number of tests instead (Makefile: --no-loadscope-reorder).
SLOW_GROUPS_FIRST = (
    "browser",  # ~400 s: the notebooks that show a widget, run in JupyterLab and Chromium
    # nbval's longest notebook (make test runs the notebooks in this run too, a group each):
    # three 2-rank jobs, two compiled with Inductor, ~170 s; the others (<60 s) fill the end
    "05_reading_traces.ipynb",
    "test_rehearsal_standin.py",  # ~360 s
    "slurm",  # ~230 s: one real Slurm cluster, a walltime kill waited out
    "test_hta_crosscheck.py",  # ~95 s: builds the HTA venv
    "test_pack.py",
    "test_validate.py",
    "test_sweep_pbs_twin.py",
    "test_pathologies.py",
)


def _rank(group: str, first: dict[str, int]) -> int:
    """The slow groups in their order, then nbval's notebooks (a group each, up to a minute),
    then the test modules, mostly seconds each: the end of the run is made of short groups."""
    return first.get(group, len(first) + (0 if group.endswith(".ipynb") else 1))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_xdist_group(item)))
    if getattr(config.option, "loadgroup", False):  # an xdist worker: every worker sorts alike
        first = {group: i for i, group in enumerate(SLOW_GROUPS_FIRST)}
        order = {id(item): i for i, item in enumerate(items)}
        items.sort(key=lambda it: (_rank(_xdist_group(it), first), order[id(it)]))
    if not config.getoption("--quick", default=False):
        return
    keep, drop = [], []
    for item in items:
        heavy = (
            any(item.get_closest_marker(m) for m in HEAVY_MARKERS)
            or bool(HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())))
            or _left_out_by_name(item)
        )
        (drop if heavy else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(autouse=True)
def queue_warnings_said_afresh():
    """The kit says each queue warning once per process; each test starts as a new process would,
    whichever tests ran before it in this worker."""
    from hpcprof_kit.jobs.queues import say_warnings_again

    say_warnings_again()


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
