"""A failure explained with its late stderr and final comment (issue #49; cases.md row 6).

On a real OpenPBS 23.06 server a failing job's stderr and its final comment ("... and
failed") arrived about 3 s after ``qstat`` first showed the job ended, while its own record
(``job_end.json``, exit 3) had already settled FAILED: the kit explained 6 of 7 such jobs with
"stderr is empty" and the comment from the job's start, and ``status`` kept that comment.

Here a stand-in ``qstat`` (a real PBS server cannot be installed) serves the job as that server
did: running with its start comment for the first ``LATE_AFTER`` questions, then finished, and
only then writes the job's stderr, as the MoM stages it. The tests gate on what the server
does (the count of questions it answered, the files it wrote), never on a sleep.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.jobs import Job
from hpcprof_kit.jobs.late_records import settle
from hpcprof_kit.jobs.rundir import RunDir

JOB = "6.pbshost"
STARTED = "Job run at Thu Nov 26 at 10:00 on (pbshost:ncpus=1)"
FAILED = f"{STARTED} and failed"
SERVER = r"""
import json, os, sys
state = os.environ["LATE_STATE"]
asked = int(open(state).read()) + 1 if os.path.exists(state) else 1
open(state, "w").write(str(asked))
late = asked > int(os.environ["LATE_AFTER"])
job = {"job_state": "R", "substate": 42, "comment": os.environ["LATE_STARTED"],
       "exec_host": "pbshost/0"}
if late:
    job.update(job_state="F", substate=93, Exit_status=3, comment=os.environ["LATE_FAILED"])
    err = os.environ["LATE_STDERR"]
    if not os.path.exists(err):
        open(err, "w").write("sl.sh: exiting with 3\n")
print(json.dumps({"pbs_version": "23.06.06", "Jobs": {sys.argv[-1]: job}}))
"""


@pytest.fixture
def server(tmp_path, monkeypatch):
    """The stand-in qstat; returns the run directory of job 6 (its record: exit 3) and a
    function telling how many questions the server has answered."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "qstat").write_text(f"#!{sys.executable}\n{SERVER}")
    (folder / "qstat").chmod(0o755)
    run = tmp_path / "run"
    run.mkdir()
    RunDir(run).update(backend="pbs", job_id=JOB, state="RUNNING", walltime_s=300)
    (run / "job_end.json").write_text(json.dumps({"exit_code": 3, "signal": None,
                                                   "ended_at": "T"}))  # fmt: skip
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LATE_STATE", str(tmp_path / "asked"))
    monkeypatch.setenv("LATE_STARTED", STARTED)
    monkeypatch.setenv("LATE_FAILED", FAILED)
    monkeypatch.setenv("LATE_STDERR", str(run / "stderr"))

    def asked() -> int:
        path = tmp_path / "asked"
        return int(path.read_text()) if path.exists() else 0

    return run, asked


def test_06_a_failure_is_explained_with_its_late_stderr_and_final_comment(server, monkeypatch,
                                                                          capsys):  # fmt: skip
    run, asked = server
    monkeypatch.setenv("LATE_AFTER", "2")  # the server finishes the job at its 3rd answer
    job = Job.from_run_dir(run)
    assert job.refresh() == "FAILED"  # the record settles it while PBS still says R
    assert (job.manifest["comment"], job.exit_code) == (STARTED, 3)
    assert not (run / "stderr").exists()
    settle(job, interval=0.0)
    assert asked() == 3 and (run / "stderr").exists()
    assert (job.manifest["state"], job.manifest["comment"]) == ("FAILED", FAILED)
    assert main(["explain", str(run)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [f"job {JOB} ended FAILED", "  exit code: 3"]
    assert f"  scheduler's reason: {FAILED}" in out
    assert "    | sl.sh: exiting with 3" in out and "  stderr is empty" not in out


def test_status_re_reads_the_late_comment_and_the_state_stays(server, monkeypatch, capsys):
    run, asked = server
    monkeypatch.setenv("LATE_AFTER", "1")
    job = Job.from_run_dir(run)
    assert job.refresh() == "FAILED" and job.manifest["comment"] == STARTED
    assert main(["status", str(run)]) == 0  # the 2nd answer: the job has finished
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"FAILED  job {JOB}  exit code 3"
    assert f"scheduler comment: {FAILED}" in out
    assert "  sl.sh: exiting with 3" in out
    assert asked() == 2


def test_a_final_state_long_past_asks_the_server_nothing_more(server, monkeypatch):
    run, asked = server
    monkeypatch.setenv("LATE_AFTER", "100")
    job = Job.from_run_dir(run)
    assert job.refresh() == "FAILED" and asked() == 1
    long_ago = (datetime.now(timezone.utc) - timedelta(minutes=5)).isoformat()
    RunDir(run).update(ended_at=long_ago)
    settle(job, interval=0.0)
    assert asked() == 1 and job.manifest["comment"] == STARTED


def test_the_wait_for_a_late_word_is_bounded(server, monkeypatch):
    """A server that never finishes the job: the explanation goes on without its word."""
    run, asked = server
    monkeypatch.setenv("LATE_AFTER", "1000000")
    job = Job.from_run_dir(run)
    settle(job, timeout=0.0, interval=0.0)
    assert job.manifest["state"] == "FAILED" and job.manifest["comment"] == STARTED
    assert not Path(run / "stderr").exists()
