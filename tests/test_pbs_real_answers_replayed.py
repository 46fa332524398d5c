"""The PBS backend against a real OpenPBS server's own answers, replayed (issue #25).

``../shared/reference/openpbs/qstat_x_f_F_json.json`` is what a real OpenPBS 23.06 server
printed for ``qstat -x -f -F json`` about 18 jobs. A stand-in ``qstat`` (a real PBS server
cannot be installed here) serves those records as that server did, with job history on or
off (``../shared/reference/openpbs/README.md``): with history off ``qstat -x`` prints JSON
without ``Jobs`` and says so on stderr, and plain ``qstat`` of a finished job exits 35.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from hpcprof_kit.jobs import Job
from hpcprof_kit.jobs.backends import SchedulerNotAnswering
from hpcprof_kit.jobs.backends.pbs import PbsBackend, text_attributes
from hpcprof_kit.jobs.rundir import RunDir

from must_have import missing

SERVER = r"""
import json, os, sys
jobs = json.load(open(os.environ["REPLAY_JOBS"]))
history = os.environ.get("REPLAY_HISTORY", "on") == "on"
args = sys.argv[1:]
job_id = args[-1]
head = {"timestamp": 1764014400, "pbs_version": "23.06.06", "pbs_server": "pbshost"}
job = jobs["Jobs"].get(job_id)
if "json" not in args:
    sys.stderr.write(f"qstat: {job_id} text form not replayed\n"); sys.exit(2)
if "-x" in args and not history:
    print(json.dumps(head)); sys.stderr.write("qstat: PBS is not configured to maintain job history\n")
    sys.exit(0)
if job is None or (not history and job["job_state"] == "F" and "-x" in args):
    sys.stderr.write(f"qstat: Unknown Job Id {job_id}\n"); sys.exit(153)
if "-x" not in args and job["job_state"] == "F":
    if not history:
        sys.stderr.write(f"qstat: Unknown Job Id {job_id}\n"); sys.exit(153)
    sys.stderr.write(f"qstat: {job_id} Job has finished, use -x or -H to obtain historical job information\n")
    sys.exit(35)
print(json.dumps({**head, "Jobs": {job_id: job}}))
"""


REAL = Path(__file__).resolve().parents[2] / "shared" / "reference" / "openpbs"


@pytest.fixture(scope="module")
def real_jobs() -> dict:
    path = REAL / "qstat_x_f_F_json.json"
    if not path.exists():
        missing(f"the real OpenPBS answers are not at {path}")
    return json.loads(path.read_text())


@pytest.fixture
def server(tmp_path, monkeypatch, real_jobs):
    """A qstat on PATH that answers as the real server did; returns a function that sets
    the jobs it knows (changes applied to copies of the real records) and the history."""
    folder = tmp_path / "bin"
    folder.mkdir()
    qstat = folder / "qstat"
    qstat.write_text(f"#!{sys.executable}\n{SERVER}")
    qstat.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")

    def serve(history: str = "on", added: dict | None = None, **changes: dict) -> None:
        jobs = json.loads(json.dumps(real_jobs))
        for job_id, change in changes.items():
            jobs["Jobs"][job_id.replace("_", ".")].update(change)
        jobs["Jobs"].update(added or {})
        (tmp_path / "jobs.json").write_text(json.dumps(jobs))
        monkeypatch.setenv("REPLAY_JOBS", str(tmp_path / "jobs.json"))
        monkeypatch.setenv("REPLAY_HISTORY", history)

    return serve


def run_dir(tmp_path: Path, name: str, record: dict | None = None) -> Path:
    path = tmp_path / name
    path.mkdir()
    if record is not None:
        (path / "job_end.json").write_text(json.dumps(record))
    return path


# what each real job must read as: state, exit code, words in the note
EXPECTED = {
    "0.pbshost": ("COMPLETED", 0, ""),
    "6.pbshost": ("FAILED", 127, ""),
    "9.pbshost": ("FAILED", 1, ""),
    "25.pbshost": ("CANCELLED", 271, "deleted by pbsuser@pbshost (qdel)"),
    "26.pbshost": ("TIMEOUT", -29, "walltime"),
    "27.pbshost": ("CANCELLED", None, "deleted (qdel) before it ran"),
    "33.pbshost": ("CANCELLED", 271, "deleted by pbsuser@pbshost"),
    "34.pbshost": ("CANCELLED", None, "deleted (qdel) before it ran"),
}


def test_every_real_job_reads_as_it_ended(server, real_jobs, tmp_path):
    server()
    for job_id, job in real_jobs["Jobs"].items():
        status = PbsBackend().poll(run_dir(tmp_path, job_id), job_id)
        assert status.comment == (job.get("comment") or ""), job_id
        state, code, words = EXPECTED.get(
            job_id,
            ("COMPLETED" if job.get("Exit_status") == 0 else "FAILED", job.get("Exit_status"), ""),
        )
        assert (status.state, status.exit_code) == (state, code), (job_id, status)
        assert words in status.note, (job_id, status.note)


def test_the_walltime_kill_is_timeout_with_the_traps_record(server, tmp_path):
    server()
    record = {"exit_code": 143, "signal": 15, "ended_at": "2026-11-24T19:55:26"}
    status = PbsBackend().poll(run_dir(tmp_path, "wall", record), "26.pbshost")
    assert (status.state, status.exit_code) == ("TIMEOUT", -29)
    assert "exceeded resource walltime" in status.comment


def test_a_qdel_from_outside_the_kit_is_cancelled_with_who(server, tmp_path):
    server()
    record = {"exit_code": 143, "signal": 15}
    status = PbsBackend().poll(run_dir(tmp_path, "del", record), "25.pbshost")
    assert (status.state, status.note) == (
        "CANCELLED",
        "deleted by pbsuser@pbshost (qdel): Exit_status 271: killed by signal 15 (SIGTERM)",
    )


def test_without_history_a_running_job_runs_and_a_finished_one_ends_by_its_record(server, tmp_path):
    server("off", **{"25_pbshost": {"job_state": "R", "comment": "Job run at Tue Nov 24"}})
    running = PbsBackend().poll(run_dir(tmp_path, "r"), "25.pbshost")
    assert running.state == "RUNNING" and running.comment == "Job run at Tue Nov 24"
    done = PbsBackend().poll(run_dir(tmp_path, "f", {"exit_code": 0}), "0.pbshost")
    assert (done.state, done.exit_code) == ("COMPLETED", 0)
    failed = PbsBackend().poll(run_dir(tmp_path, "g", {"exit_code": 127}), "6.pbshost")
    assert (failed.state, failed.exit_code) == ("FAILED", 127)
    lost = PbsBackend().poll(run_dir(tmp_path, "h"), "0.pbshost")
    assert lost.state == "LOST" and "keeps no job history" in lost.note


def test_a_job_that_can_never_run_ends_the_wait_and_stays_queued(server, tmp_path, capsys):
    said = "Can Never Run: Not enough total nodes available"
    server(**{"34_pbshost": {"job_state": "Q", "comment": said}})
    (tmp_path / "run").mkdir()
    run = RunDir(tmp_path / "run")
    run.update(state="QUEUED", job_id="34.pbshost", backend="pbs", walltime_s=60)
    job = Job(run, PbsBackend(), "34.pbshost")
    assert job.wait(progress=True) == "QUEUED"
    assert run.manifest()["comment"] == said
    assert said in capsys.readouterr().err  # the wait's last line says why it ended


def test_an_answer_the_kit_cannot_read_is_kept_and_the_state_stays(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    qstat = folder / "qstat"
    qstat.write_text('#!/bin/bash\necho \'{"Jobs": ["not", "a", "table"]}\'\n')
    qstat.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(SchedulerNotAnswering, match="scheduler answer not understood") as err:
        PbsBackend().poll(run_dir(tmp_path, "x"), "5.pbshost")
    assert '["not", "a", "table"]' in str(err.value)
    (tmp_path / "run").mkdir()
    run = RunDir(tmp_path / "run")
    run.update(state="RUNNING", job_id="5.pbshost", backend="pbs")
    assert Job(run, PbsBackend(), "5.pbshost").refresh() == "RUNNING"
    note = run.manifest()["note"]
    assert note.startswith("scheduler answer not understood since") and "table" in note


def test_qstat_text_continuation_lines_belong_to_the_value_above():
    text = (
        "Job Id: 25.pbshost\n    Job_Name = sleeper\n"
        "    comment = Job run at Tue Nov 24 at 19:54 on (pbshost:ncpus=1) and terminat\n"
        "\ted by pbsuser@pbshost\n    job_state = F\n    Exit_status = 271\n"
    )
    attrs = text_attributes(text)
    assert attrs["comment"].endswith("and terminated by pbsuser@pbshost")
    assert attrs["Exit_status"] == "271" and attrs["job_state"] == "F"
