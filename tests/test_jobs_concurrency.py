"""Many writers, one truth: concurrent submissions get their own run directories, and
processes refreshing the same job serialise their manifest updates and lose nothing."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from hpcprof_kit.jobs import Job, JobSpec, RunDir, submit
from hpcprof_kit.jobs.backends import Status

from gates import Gate

FORK = multiprocessing.get_context("fork")


def _submit_five(barrier, results) -> None:
    barrier.wait()  # all four processes submit at once
    # A real (if short) program: Hydra's mpiexec around a bare `true` once died of SIGPIPE (141)
    # when its proxy ended before it wrote, with twenty launches at once on two cores.
    spec = JobSpec(system="local", command=["python3", "-c", "print('ok')"], ranks_per_node=1)
    results.put([str(submit(spec).run_dir) for _ in range(5)])


def test_twenty_submissions_from_four_processes_get_twenty_run_directories(isolated_runs):
    barrier, results = FORK.Barrier(4), FORK.Queue()
    workers = [FORK.Process(target=_submit_five, args=(barrier, results)) for _ in range(4)]
    for w in workers:
        w.start()
    batches = [results.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(30)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    run_dirs = [Path(d) for batch in batches for d in batch]
    assert len(set(run_dirs)) == 20
    assert sorted(p for p in isolated_runs.iterdir()) == sorted(run_dirs)
    manifests = [json.loads((d / "manifest.json").read_text()) for d in run_dirs]
    assert len({m["job_id"] for m in manifests}) == 20
    assert all(Path(m["run_dir"]) == d for m, d in zip(manifests, run_dirs, strict=True))
    for run_dir in run_dirs:
        job = Job.from_run_dir(run_dir)
        assert job.wait(timeout=60, progress=False) == "COMPLETED", job.manifest.get("note")
        assert job.tail() == "ok"
        assert not list(run_dir.glob(".manifest.json.*"))  # no temporary file left behind


def _count(run_dir: str, times: int) -> None:
    run = RunDir(Path(run_dir))
    for _ in range(times):
        run.amend(lambda m: {"count": m.get("count", 0) + 1})


def test_manifest_updates_from_four_processes_are_serialised(tmp_path):
    run = RunDir(tmp_path)
    run.update(state="NEW")
    workers = [FORK.Process(target=_count, args=(str(tmp_path), 50)) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    assert run.manifest()["count"] == 200  # a lost update would leave fewer
    assert run.manifest()["state"] == "NEW"


def _wait(run_dir: str, results) -> None:
    results.put(Job.from_run_dir(run_dir).wait(timeout=60, progress=False))


def test_two_processes_refreshing_one_job_lose_nothing(tmp_path):
    gate = Gate(tmp_path)
    job = submit(JobSpec(system="local", command=gate.command("exit 0"), ranks_per_node=1))
    gate.wait_started()
    results = FORK.Queue()
    pollers = [FORK.Process(target=_wait, args=(str(job.run_dir), results)) for _ in range(2)]
    for p in pollers:
        p.start()
    gate.release()
    assert sorted(results.get(timeout=60) for _ in pollers) == ["COMPLETED", "COMPLETED"]
    for p in pollers:
        p.join(30)
    manifest = job.manifest
    assert (manifest["state"], manifest["exit_code"], manifest["job_id"]) == (
        "COMPLETED", 0, job.job_id,
    )  # fmt: skip
    assert manifest["process"]["pid"] == int(job.job_id.split("-")[1])
    assert manifest["started_at"] <= manifest["ended_at"]
    assert manifest["hosts"] and manifest["submitted_at"]


class _StalePoller:
    """A backend whose answer is overtaken: while it polls, another process records the end."""

    name, poll_interval = "stale", 0.01

    def poll(self, run_dir: Path, job_id: str) -> Status:
        RunDir(run_dir).update(state="COMPLETED", exit_code=0, ended_at="then")
        return Status("RUNNING")


def test_a_slower_poller_never_overwrites_the_end_another_recorded(tmp_path):
    run = RunDir(tmp_path)
    run.update(state="RUNNING", job_id="stale-1", backend="stale")
    job = Job(run, _StalePoller(), "stale-1")
    assert job.refresh() == "COMPLETED"
    assert (run.manifest()["state"], run.manifest()["ended_at"]) == ("COMPLETED", "then")
