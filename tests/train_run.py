"""One real 2-rank training run for the whole test run: the fixture ``train_run``.

Hydra ``mpiexec -n 2`` starts the train app (gloo DDP on the CPU) profiled with
``wait=1, warmup=1, active=2, repeat=2`` over 3 epochs of 3 steps, so the run writes both cycles'
traces and tables, timings, and each rank's threads at exit. The tests that read it (the apps'
output, the profiler factory's files, the analyses of real CPU traces, the process group's
teardown) share it read-only, one run instead of four: they are one xdist group
(tests/conftest.py), so the run is made once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

FLAGS = ("--epochs", "3", "--steps-per-epoch", "3", "--warmup", "1", "--profile",
         "--prof-wait", "1", "--prof-warmup", "1", "--prof-active", "2", "--prof-repeat", "2")  # fmt: skip
SCHEDULE = {"wait": 1, "warmup": 1, "active": 2, "repeat": 2, "steps": 9}

# Each rank writes the names of the threads still alive at interpreter exit (registered first
# by sitecustomize, so it runs after every other atexit handler).
THREADS_AT_EXIT = """
import atexit, os
def _report():
    names = sorted(open(f"/proc/self/task/{t}/comm").read().strip()
                   for t in os.listdir("/proc/self/task"))
    folder = os.environ["THREADS_AT_EXIT_DIR"]
    with open(os.path.join(folder, f"rank-{os.environ.get('PMI_RANK')}.txt"), "w") as fh:
        fh.write(" ".join(names))
atexit.register(_report)
"""


@dataclass(frozen=True)
class TrainRun:
    """The run's folder ($HPCPROF_RUN_DIR: traces/, tables/, timings/), what the ranks printed,
    and the folder of each rank's threads at exit."""

    run_dir: Path
    stdout: str
    stderr: str
    returncode: int
    threads: Path


@pytest.fixture(scope="session")
def train_run(tmp_path_factory, mpiexec) -> TrainRun:
    root = tmp_path_factory.mktemp("train_run")
    hook, threads, run_dir = root / "hook", root / "threads", root / "train_local_N1_R2"
    for folder in (hook, threads, run_dir):
        folder.mkdir()  # the run folder as the job layer makes it before the ranks start
    (hook / "sitecustomize.py").write_text(THREADS_AT_EXIT)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(HPCPROF_RUN_DIR=str(run_dir), THREADS_AT_EXIT_DIR=str(threads), KINETO_LOG_LEVEL="6")
    env["PYTHONPATH"] = os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")])
    cmd = [mpiexec, "-n", "2", sys.executable, "-m", "hpcprof_kit.apps.train", *FLAGS]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    return TrainRun(run_dir, done.stdout, done.stderr, done.returncode, threads)
