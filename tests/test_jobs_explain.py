"""``wait_for`` and ``explain``: what a learner reads when a job fails, hangs or cannot start.

Local jobs run through the kit's local backend; the Slurm ones through the real Slurm on
localhost (tests/slurm_cluster.py). PBS cannot run here: its test replays the JSON a real
OpenPBS 23.06.06 server printed (``qstat -x -f -F json``, tests/fixtures/pbs/) through a
``qstat`` that answers with it, and reads the ``comment`` back through the PBS backend.
Jobs that must stay running are held on named pipes (tests/gates.py), never on sleeps.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.jobs import JobSpec, explain, submit, wait_for
from hpcprof_kit.jobs.backends.pbs import PbsBackend, comment
from hpcprof_kit.jobs.explain import (
    ADVICE,
    CLI_NEVER_RUNS_ADVICE,
    NEEDS_RUN,
    NEVER_RUNS_ADVICE,
    SLURM_REASONS,
)

from gates import Gate
from slurm_cluster import _until

PBS_JSON = Path(__file__).parent / "fixtures" / "pbs" / "openpbs_qstat_x_f_F_json.json"


def tiny(system: str, *command: str, **fields) -> JobSpec:
    fields = {"ranks_per_node": 1, "binding": "none", **fields}
    return JobSpec(system=system, command=list(command), **fields)


def test_a_failed_job_is_explained_with_its_exit_code_stderr_and_advice(capsys):
    job = submit(tiny("local", "bash", "-c", "echo 'ValueError: batch size 0' >&2; exit 3"))
    assert wait_for(job, timeout=60, progress=False) == "FAILED"
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"job {job.job_id} ended FAILED", "  exit code: 3"]
    assert lines[lines.index("  last lines of stderr:") + 1] == "    | ValueError: batch size 0"
    assert lines[-2:] == [f"  what to do: {ADVICE['FAILED']}", NEEDS_RUN]
    assert "read the stderr lines above" in ADVICE["FAILED"]


def test_a_job_still_running_at_the_timeout_offers_cancel(tmp_path, capsys):
    gate = Gate(tmp_path)
    job = submit(tiny("local", *gate.command("exit 0")))
    gate.wait_started()  # the job runs and blocks on the gate until the test releases it
    assert wait_for(job, timeout=0, progress=False) == "RUNNING"
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"job {job.job_id} has not ended: it is RUNNING"
    assert "exit code" not in out  # a running job has none yet
    assert lines[-2] == f"  what to do: {ADVICE['RUNNING']}"
    assert "wait_for(job)" in lines[-2] and "job.cancel()" in lines[-2]
    assert job.cancel() == "CANCELLED"
    text = explain(job)
    assert text.splitlines()[0] == f"job {job.job_id} ended CANCELLED"
    assert "  signal: killed by signal 15 (SIGTERM)" in text.splitlines()


def test_a_completed_job_prints_nothing(capsys):
    job = submit(tiny("local", "echo", "fine"))
    assert wait_for(job, timeout=60, progress=False) == "COMPLETED"
    assert capsys.readouterr().out == ""


# --- PBS: the server's comment, replayed from a real OpenPBS server -----------------------


def _replay_qstat(folder: Path) -> None:
    """A ``qstat`` that answers ``qstat -x -F json -f ID`` as the real server did for ID."""
    script = folder / "qstat"
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"doc = json.load(open({str(PBS_JSON)!r}))\n"
        "job = sys.argv[-1]\n"
        "if job not in doc['Jobs']:\n"
        "    print(f'qstat: Unknown Job Id {job}', file=sys.stderr); sys.exit(153)\n"
        "doc['Jobs'] = {job: doc['Jobs'][job]}\n"
        "print(json.dumps(doc, indent=4))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize(
    ("job_id", "said"),
    [
        ("34.pbshost", "Can Never Run: Not enough total nodes available and terminated"),
        ("26.pbshost", "Job run at Tue Nov 24 at 19:55 on (pbshost:ncpus=1) and exceeded "
                       "resource walltime"),
        ("9.pbshost", "Job run at Tue Nov 24 at 19:53 on (pbshost:ncpus=1) and failed"),
        ("27.pbshost", None),  # deleted while queued: the server left no comment
        ("9999.pbshost", None),  # unknown to the server
    ],
)  # fmt: skip
def test_pbs_comment_replayed_from_a_real_openpbs_server(job_id, said, tmp_path, monkeypatch):
    _replay_qstat(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert PbsBackend().reason(tmp_path, job_id) == said


def test_pbs_replay_every_job_comment_is_read_as_the_server_wrote_it():
    jobs = json.loads(PBS_JSON.read_text())["Jobs"]
    assert len(jobs) == 18
    for attrs in jobs.values():
        assert comment(attrs) == attrs.get("comment")
    can_never = comment(jobs["34.pbshost"])
    from hpcprof_kit.jobs.explain import scheduler_meaning

    # cases.md row 15: the job that could never run was deleted: it has ended, not waiting
    assert scheduler_meaning(can_never) == (
        "ended: the request could never fit this server, and the job was deleted (qdel) before "
        "it ran"
    )
    assert scheduler_meaning("Can Never Run: Not enough total nodes available") == (
        "the request can never fit this server: ask for fewer nodes or another queue"
    )


# --- Slurm: its own Reason, from the real controller --------------------------------------


def _slurm_reason_set(cluster, job_id: str, timeout: float = 30.0) -> str:
    """Until Slurm has given the pending job a reason (its scheduler decides when): a gate on
    the scheduler, as ``SlurmCluster.wait_state`` is, not a poll of the kit."""
    ok, said = _until(
        lambda: cluster.run("squeue", "-h", "-j", job_id, "-o", "%r", check=False).stdout.strip(),
        lambda s: s not in ("", "None"), timeout, interval=0.2,
    )  # fmt: skip
    assert ok, f"Slurm gave job {job_id} no reason within {timeout:g} s (last: {said!r})"
    return said


@pytest.mark.slurm
def test_slurm_job_that_can_never_run_is_explained_with_slurms_reason(
    cluster_env, capsys, isolated_runs
):
    # The test cluster has one node; Slurm accepts a 2-node job and keeps it pending.
    job = submit(tiny("slurm", "true", nodes=2), backend="slurm")
    said = _slurm_reason_set(cluster_env, job.job_id)
    assert wait_for(job, timeout=0, progress=False) == "QUEUED"
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"job {job.job_id} has not ended: it is QUEUED"
    # Slurm names it PartitionConfig or PartitionNodeLimit, and may change one for the other
    # between two readings (its scheduler passes again; seen on a loaded machine): the learner
    # reads the kit's words for the reason Slurm gave when the kit asked.
    too_big = ("PartitionConfig", "PartitionNodeLimit")
    assert said in too_big
    given = [f"  scheduler's reason: {r} ({SLURM_REASONS[r]})" for r in too_big]
    assert [line for line in lines if line in given], lines
    assert all("ask for" in SLURM_REASONS[r] for r in too_big)
    # It can never start on this cluster: the advice is to change the request, not to wait.
    assert lines[-2] == f"  what to do: {NEVER_RUNS_ADVICE}"
    assert main(["explain", job.job_id]) == 0  # the command finds the run by its job id
    said = capsys.readouterr().out.splitlines()
    assert said[-1] == f"  what to do: {CLI_NEVER_RUNS_ADVICE.format(run=job.run_dir)}"
    assert job.cancel() == "CANCELLED"


@pytest.mark.slurm
def test_slurm_submit_wait_on_a_job_that_can_never_run_says_why_and_exits_3(
    cluster_env, capsys, isolated_runs
):
    """A 2-node job on the one-node cluster: Slurm keeps it pending for good, and --wait ends
    as soon as Slurm says why (no timeout), with that reason, the advice and exit code 3."""
    code = main(["submit", "--system", "slurm", "--backend", "slurm", "--nodes", "2",
                 "--ranks-per-node", "1", "--binding", "none", "--wait", "--", "true"])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    run = lines[0].removeprefix("run directory: ")
    job_id = lines[1].removeprefix("job id: ")
    try:
        assert code == 3
        assert lines[2:4] == ["state: QUEUED", f"job {job_id} has not ended: it is QUEUED"]
        reason = next(ln for ln in lines if ln.startswith("  scheduler's reason: "))
        said = reason.removeprefix("  scheduler's reason: ").split(" (")[0]
        assert said in ("PartitionConfig", "PartitionNodeLimit")
        assert lines[-1] == f"  what to do: {CLI_NEVER_RUNS_ADVICE.format(run=run)}"
    finally:
        assert main(["cancel", run]) == 0


@pytest.mark.slurm
def test_slurm_failed_job_is_explained_with_its_stderr_and_slurms_reason(cluster_env, capsys):
    job = submit(tiny("slurm", "bash", "-c", "echo 'no such input' >&2; exit 7"), backend="slurm")
    assert wait_for(job, timeout=60, progress=False) == "FAILED"
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"job {job.job_id} ended FAILED", "  exit code: 7"]
    assert "    | no such input" in lines
    assert lines[-2] == f"  what to do: {ADVICE['FAILED']}"


@pytest.mark.slurm
def test_slurm_held_job_is_told_scontrol_release_not_waiting_for_nodes(
    cluster_env, capsys, isolated_runs, tmp_path
):
    """Issue #49: a held job (`scontrol uhold`, Slurm's JobHeldUser) waits for a release, not
    for nodes; released, it runs. A job that fills the node keeps the kit's job pending until
    it is held (a gate file ends that job)."""
    gate = tmp_path / "gate"
    blocker = cluster_env.run(
        "sbatch",
        "--parsable",
        "--exclusive",
        "-o",
        "/dev/null",
        "--wrap",
        f"until [ -e {gate} ]; do sleep 0.1; done",
    ).stdout.strip()
    try:
        cluster_env.wait_state(blocker, "RUNNING")
        job = submit(tiny("slurm", "true"), backend="slurm")
        cluster_env.run("scontrol", "uhold", job.job_id)  # a user hold (root's hold is an admin's)
        said = _slurm_reason_set(cluster_env, job.job_id)
        assert said == "JobHeldUser"
        assert job.refresh() == "QUEUED"
        assert (
            job.manifest["note"] == "held: it waits for a release (scontrol release), not for nodes"
        )
        assert main(["explain", job.job_id]) == 0
        out = capsys.readouterr().out
        assert "waiting for nodes" not in out
        assert (
            f"  scheduler's reason: JobHeldUser (held by its owner: `scontrol release "
            f"{job.job_id}` lets it run)"
        ) in out.splitlines()
        assert out.splitlines()[-1] == (
            f"  what to do: it is held, so it waits for a release, not for nodes: release it "
            f"(scontrol release {job.job_id}), then look again (hpcprof-kit explain "
            f"{job.run_dir}), or stop it with hpcprof-kit cancel {job.run_dir}"
        )
        cluster_env.run("scontrol", "release", job.job_id)
    finally:
        gate.touch()
    assert job.wait(timeout=120, progress=False) == "COMPLETED"
