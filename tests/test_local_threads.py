"""Two ranks on a laptop share its cores: each local rank gets OMP_NUM_THREADS = usable cores /
ranks (at least 1) unless you set it, and torch takes it (real local backend, Hydra mpiexec)."""

from __future__ import annotations

import os

import pytest

from hpcprof_kit.jobs import JobSpec, submit, wait_for
from hpcprof_kit.jobs.backends.local import usable_cores

# One os.write of a short line: the ranks' lines then never interleave in the job's stdout (a
# print of several pieces was once seen split by the other rank's line, "rankrank 1 ... 0 omp").
PROBE = (
    "import os, torch; "
    "os.write(1, f\"rank {os.environ['PMI_RANK']} omp {os.environ.get('OMP_NUM_THREADS')} "
    'torch {torch.get_num_threads()}\\n".encode())'
)


def _run(monkeypatch, env=None, outside=None):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    if outside is not None:
        monkeypatch.setenv("OMP_NUM_THREADS", outside)
    spec = JobSpec(system="local", command=["python3", "-c", PROBE], ranks_per_node=2,
                   env=env or {})  # fmt: skip
    job = submit(spec)
    assert wait_for(job, timeout=300, progress=False) == "COMPLETED", job.tail(stream="stderr")
    stdout = (job.run_dir / "stdout").read_text(errors="replace")
    lines = sorted(line for line in stdout.splitlines() if line.startswith("rank "))
    assert len(lines) == 2, f"stdout:\n{stdout}\nstderr:\n{job.tail(40, stream='stderr')}"
    return lines, job.manifest["omp_num_threads"]


@pytest.mark.mpi
def test_each_local_rank_gets_its_share_of_the_cores(monkeypatch):
    share = max(usable_cores() // 2, 1)  # 1 on a 2-core laptop
    lines, record = _run(monkeypatch)
    assert lines == [f"rank 0 omp {share} torch {share}", f"rank 1 omp {share} torch {share}"]
    assert record == {"value": share, "from": "cores / ranks"}


@pytest.mark.mpi
def test_your_own_value_wins(monkeypatch):
    lines, record = _run(monkeypatch, outside="2")
    assert lines == ["rank 0 omp 2 torch 2", "rank 1 omp 2 torch 2"]
    assert record == {"value": 2, "from": "your environment"}


@pytest.mark.mpi
def test_the_specs_env_wins_too(monkeypatch):
    lines, record = _run(monkeypatch, env={"OMP_NUM_THREADS": "1"}, outside="2")
    assert lines == ["rank 0 omp 1 torch 1", "rank 1 omp 1 torch 1"]
    assert record == {"value": 1, "from": "the spec's env"}


def test_a_two_core_machine_gives_one_thread_per_rank(tmp_path, monkeypatch):
    from hpcprof_kit.jobs.backends import local

    monkeypatch.setattr(local, "usable_cores", lambda: 2)
    (tmp_path / "spec.json").write_text('{"ranks_per_node": 2, "env": {}}')
    assert local.threads_per_rank(tmp_path, {}) == {"value": 1, "from": "cores / ranks"}
    (tmp_path / "spec.json").write_text('{"ranks_per_node": 4, "env": {}}')
    assert local.threads_per_rank(tmp_path, {}) == {"value": 1, "from": "cores / ranks"}
    assert os.cpu_count()  # the machine says how many it has
