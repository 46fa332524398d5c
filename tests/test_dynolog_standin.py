"""The Dynolog recipe run by bash against stand-in ``dyno``, ``dynolog``, ``mpiexec``, ``srun``
and ``scontrol`` that record their argv: the exact requests per node, the init-delay rule by
torch version (decided in the job when the version is not given), the registration check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcprof_kit.errors import OnDemandError, SpecError
from hpcprof_kit.ondemand.dynolog import (
    INIT_DELAY_ERROR,
    REGISTRATION_LINE,
    check_registration,
    daemon_env,
    dynolog_recipe,
)

STANDIN = """#!{python}
import json, os, sys
name = os.path.basename(sys.argv[0])
with open(os.environ["STANDIN_LOG"], "a") as log:
    log.write(json.dumps([name, *sys.argv[1:]]) + "\\n")
if name == "dyno":
    print("Matched 1 processes")
if name == "scontrol":
    print("\\n".join(os.environ["STANDIN_HOSTS"].split(",")))
"""
REGISTERED = f"INFO:2022-10-22 00:59:13 151209:151209 init.cpp:98] {REGISTRATION_LINE}\n"


@pytest.fixture
def job(tmp_path):
    """A job's world: stand-ins first on PATH, a run directory, a PBS node file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("dyno", "dynolog", "mpiexec", "srun", "scontrol"):
        path = bin_dir / name
        path.write_text(STANDIN.format(python=sys.executable))
        path.chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)
    run = tmp_path / "run"
    run.mkdir()
    (run / "stderr").write_text(REGISTERED * 2)
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("x1\nx1\nx2\nx2\n")
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STANDIN_LOG": str(tmp_path / "argv.jsonl"),
        "STANDIN_HOSTS": "s1,s2",
        "HPCPROF_RUN_DIR": str(run),
        "PBS_NODEFILE": str(nodefile),
        "SLURM_JOB_NODELIST": "s[1-2]",
        "SLURM_JOB_ID": "4242",
        "PYTHONPATH": str(tmp_path / "site"),
        "HOME": str(tmp_path),
    }
    return env


def run_recipe(recipe: str, env: dict[str, str]) -> tuple[list[list[str]], str, str]:
    """Run the recipe (waiting for the backgrounded daemons); the stand-ins' argv in order of
    arrival, what the rank environment holds, and the recipe's stderr."""
    script = (
        recipe
        + 'wait\necho "USE=${KINETO_USE_DAEMON-unset} DELAY=${KINETO_DAEMON_INIT_DELAY_S-unset}"\n'
    )
    done = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    log = Path(env["STANDIN_LOG"])
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return calls, done.stdout.strip().splitlines()[-1], done.stderr


def test_pbs_recipe_starts_one_daemon_per_node_and_traces_each_host(job):
    calls, env_line, err = run_recipe(dynolog_recipe("pbs", 2, 12, torch_version="2.5.1"), job)
    log_file = f"{job['HPCPROF_RUN_DIR']}/traces/dynolog/trace.json"
    assert sorted(calls) == sorted([
        ["mpiexec", "-n", "2", "--ppn", "1", "dynolog", "--enable_ipc_monitor"],
        ["dyno", "--hostname", "x1", "gputrace", "--log-file", log_file, "--iterations", "5",
         "--process-limit", "12"],
        ["dyno", "--hostname", "x2", "gputrace", "--log-file", log_file, "--iterations", "5",
         "--process-limit", "12"],
    ])  # fmt: skip
    assert env_line == "USE=1 DELAY=unset"  # torch 2.5: the delay would break init
    assert err == ""  # the ranks registered: no complaint
    assert Path(log_file).parent.is_dir()


def test_slurm_duration_trace_filtered_by_job_id(job):
    recipe = dynolog_recipe("slurm", 2, 4, iterations=None, duration_ms=2000, torch_version="2.8.0",
                            job_id=True)  # fmt: skip
    calls, _env, _err = run_recipe(recipe, job)
    dyno = [c for c in calls if c[0] == "dyno"]
    assert [c[2] for c in dyno] == ["s1", "s2"]
    assert dyno[0][6:] == ["--duration-ms", "2000", "--process-limit", "4", "--job-id", "4242"]
    assert ["srun", "--nodes=2", "--ntasks-per-node=1", "--overlap", "dynolog",
            "--enable_ipc_monitor"] in calls  # fmt: skip


def test_one_node_job_filtered_by_pids(job):
    calls, _env, _err = run_recipe(
        dynolog_recipe("pbs", 1, 4, pids=[311, 312], torch_version="2.7.1"), job
    )
    dyno = [c for c in calls if c[0] == "dyno"]
    assert [c[-2:] for c in dyno] == [
        ["--pids", "311,312"]
    ] * 2  # both lines of the node file: x1, x2


@pytest.mark.parametrize(
    ("version", "delay"), [("2.1.2", "3"), ("2.3.0", "unset"), ("2.13.0+cpu", "unset")]
)
def test_init_delay_decided_in_the_job_by_the_ranks_torch(job, tmp_path, version, delay):
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(f"__version__ = {version!r}\n")
    _calls, env_line, _err = run_recipe(dynolog_recipe("pbs", 1, 4), job)
    assert env_line == f"USE=1 DELAY={delay}"


@pytest.mark.parametrize(("version", "delay"), [("2.0.1", True), ("2.2.2", True), ("2.3.1", False)])
def test_init_delay_only_where_the_torch_version_needs_it(version, delay):
    assert ("KINETO_DAEMON_INIT_DELAY_S" in daemon_env(version)) is delay
    recipe = dynolog_recipe("slurm", 1, 4, torch_version=version)
    assert ("export KINETO_DAEMON_INIT_DELAY_S=3" in recipe.splitlines()) is delay
    if not delay:
        assert f'# ("ERROR: {INIT_DELAY_ERROR}").' in recipe.splitlines()


def test_recipe_says_when_ranks_did_not_register_or_init_broke(job):
    stderr = Path(job["HPCPROF_RUN_DIR"]) / "stderr"
    stderr.write_text("")
    _calls, _env, err = run_recipe(dynolog_recipe("pbs", 1, 4, torch_version="2.7.0"), job)
    assert f"no rank registered with dynolog yet (no '{REGISTRATION_LINE}'" in err
    stderr.write_text(f"ERROR: {INIT_DELAY_ERROR} (1258501696 != 107225088)\n")
    _calls, _env, err = run_recipe(dynolog_recipe("pbs", 1, 4, torch_version="2.7.0"), job)
    assert "Kineto init failed: unset KINETO_DAEMON_INIT_DELAY_S (torch >= 2.3)" in err


def test_check_registration_counts_ranks_and_names_the_cause():
    assert check_registration(REGISTERED * 4, ranks=4) == 4
    with pytest.raises(
        OnDemandError, match=r"^3 of 4 ranks printed 'Registering daemon config loader'"
    ):
        check_registration(REGISTERED * 3, ranks=4)
    with pytest.raises(
        OnDemandError, match="KINETO_DAEMON_INIT_DELAY_S breaks Kineto's init on torch >= 2.3"
    ):
        check_registration(REGISTERED + f"ERROR: {INIT_DELAY_ERROR} (1 != 2)\n")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"iterations": 5, "duration_ms": 100},
            "dyno ignores --duration-ms when --iterations is given",
        ),
        ({"scheduler": "pbs", "job_id": 4242}, "job_id=4242 filters nothing under pbs"),
        (
            {"nodes": 2, "pids": [5]},
            r"pids=\[5\] name processes of one node, but the job has 2 nodes",
        ),
        ({"torch_version": "1.13.1"}, "torch 1.13.1 is older than 2.0"),
        ({"iterations": 0}, "iterations=0 must be a whole number >= 1"),
    ],
)
def test_bad_requests_are_refused(kwargs, message):
    args = {"scheduler": "slurm", "nodes": 1, "ranks_per_node": 4, **kwargs}
    with pytest.raises(SpecError, match=message):
        dynolog_recipe(**args)
