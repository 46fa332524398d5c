"""Job.wait shows how far a job is: the steps its app reported, one line per change in a log."""

import sys

import pytest

from hpcprof_kit.jobs import JobSpec, submit
from hpcprof_kit.jobs.progress import read_progress, report_progress

REPORTING_JOB = (
    "import time\n"
    "from hpcprof_kit.jobs.progress import report_progress\n"
    "for done in range(1, 4):\n"
    "    time.sleep(1.5)\n"
    "    report_progress(done, 3)\n"
)


@pytest.mark.timeout(120)
def test_wait_prints_the_reported_steps_when_stderr_is_a_log(capsys):
    spec = JobSpec(system="local", example="train", ranks_per_node=1,
                   command=(sys.executable, "-c", REPORTING_JOB))  # fmt: skip
    job = submit(spec, backend="local")
    assert job.wait(timeout=60, progress=True) == "COMPLETED"
    lines = [line for line in capsys.readouterr().err.splitlines() if job.job_id in line]
    shown = [line.split(job.run_dir.name, 1)[1].strip() for line in lines]
    assert "RUNNING 1/3 steps" in shown and "RUNNING 2/3 steps" in shown
    assert shown[-1] == "COMPLETED"
    assert len(shown) == len(set(shown)), "a log gets one line per change, not one per poll"
    assert read_progress(job.run_dir) == (1.0, "3/3 steps")


def test_progress_outside_a_job_is_a_no_op(tmp_path, monkeypatch):
    monkeypatch.delenv("HPCPROF_RUN_DIR", raising=False)
    report_progress(1, 2)
    monkeypatch.setenv("HPCPROF_RUN_DIR", str(tmp_path))
    report_progress(1, 4, unit="epochs")
    assert read_progress(tmp_path) == (0.25, "1/4 epochs")
    (tmp_path / "progress.json").write_text("{half a fi")
    assert read_progress(tmp_path) is None
