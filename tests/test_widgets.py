"""The widgets' logic, driven headless: set values, click buttons, read what they show."""

from __future__ import annotations

import html
import threading

import pytest

from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs import JobSpec, submit
from hpcprof_kit.widgets import job_form, job_monitor, schedule_explorer
from hpcprof_kit.widgets.monitor import JobMonitor

TRAIN_LINE = "mpiexec -n 2 \\\n    python3 -m hpcprof_kit.apps.train"


def _shown(widget_html: str) -> str:
    """The text inside the <pre> an HTML widget shows."""
    return html.unescape(widget_html.split(">", 1)[1].rsplit("</pre>", 1)[0])


def test_form_previews_the_exact_rendered_script_and_follows_the_toggle():
    form = job_form(system="local", ranks_per_node=2)
    assert form.script == JobSpec(system="local", ranks_per_node=2).render()
    assert _shown(form.preview.value) == form.script
    assert form.script.rstrip().endswith(TRAIN_LINE)

    form.profile.value = True
    assert form.script.rstrip().endswith(TRAIN_LINE + " --profile")
    form.ranks_per_node.value = 1
    assert "mpiexec -n 1 \\\n" in form.script
    assert form.script == JobSpec(system="local", ranks_per_node=1, profile=True).render()


def test_form_shows_the_kits_message_instead_of_the_script(isolated_runs):
    form = job_form(system="local")
    form.nodes.value = 3
    assert form.script == ""
    assert form.error.startswith("nodes 3 is outside the default queue's range 1-1 on local")
    assert "nodes 3 is outside" in _shown(form.preview.value)
    assert form.submit_button.disabled

    form.submit_button.click()  # a forced click still submits nothing
    assert form.job is None
    assert "nodes 3 is outside" in html.unescape(form.status.value)
    assert not isolated_runs.exists() or not any(isolated_runs.iterdir())

    form.nodes.value = 1
    assert form.error == "" and not form.submit_button.disabled


def test_form_switches_queues_and_walltime_limits_with_the_system():
    form = job_form(system="local")
    form.system.value = "aurora"
    assert [v for _, v in form.queue.options] == ["debug", "debug-scaling", "prod", "capacity"]
    assert form.queue.value == "debug"
    assert "account" in form.error  # Aurora charges a project
    form.account.value = "MYPROJ"
    assert form.error == ""
    assert "#PBS -A MYPROJ\n#PBS -q debug\n" in form.script
    form.queue.value = "prod"
    assert form.error.startswith("nodes 1 is outside queue prod's range 256-10624 on aurora")
    form.nodes.value = 256
    assert "#PBS -q prod\n#PBS -l select=256\n" in form.script
    form.walltime.value = "1:00"
    assert "walltime '1:00' is not HH:MM:SS" in form.error


def test_submit_button_runs_the_previewed_script_and_the_monitor_follows_it():
    form = job_form(system="local", ranks_per_node=1, command=["echo", "hello from the form"])
    shown = form.script
    form.submit_button.click()
    job = form.job
    assert job is not None and form.monitor is not None
    assert form.monitor.wait(timeout=60) == "COMPLETED"
    assert (job.run_dir / "job.sh").read_text() == shown  # submitted exactly what was shown
    assert _shown(form.monitor.output.value) == "hello from the form"
    assert form.monitor.bar.bar_style == "success"
    assert form.monitor.bar.value == form.monitor.bar.max
    assert form.monitor.state.value.startswith("COMPLETED, exit code 0 after")
    assert f"submitted {job.job_id} -> {job.run_dir.name}" == html.unescape(form.status.value)
    assert form.widget.children[-1] is form.monitor.widget


def test_monitor_shows_a_failed_jobs_stderr_and_exit_code():
    job = submit(
        JobSpec(
            system="local",
            ranks_per_node=1,
            command=["bash", "-c", "echo step 1; echo boom >&2; exit 3"],
        )
    )
    monitor = job_monitor(job, interval=0.2)
    assert monitor.wait(timeout=60) == "FAILED"
    assert monitor.bar.bar_style == "danger"
    assert monitor.state.value.startswith("FAILED, exit code 3")
    shown = _shown(monitor.output.value)
    assert "step 1" in shown and "boom" in shown


class _FlakyJob:
    """A job whose polls fail ``failures`` times (a run directory on a file system that
    hiccups), then report COMPLETED; it records what the monitor showed at each poll."""

    job_id, walltime = "local-1", 60

    def __init__(self, tmp_path, failures: int) -> None:
        self.run_dir, self.failures, self.polls, self.shown = tmp_path, failures, 0, []
        self.monitor = None
        self.failing = threading.Event()  # set once the monitor has lived through a failure

    @property
    def manifest(self) -> dict:
        return {"walltime_s": self.walltime}

    @property
    def state(self) -> str:
        self.polls += 1
        if self.monitor is not None:
            self.shown.append((self.monitor.state.value, self.monitor.bar.bar_style))
        if self.polls > self.failures:
            return "COMPLETED"
        if self.polls > 1:
            self.failing.set()
        raise OSError(f"[Errno 5] Input/output error: '{self.run_dir}/manifest.json'")

    exit_code = 0

    def tail(self, n: int, stream: str = "stdout") -> str:
        return "done"


def test_monitor_shows_a_poller_error_and_keeps_polling(tmp_path):
    job = _FlakyJob(tmp_path, failures=2)
    monitor = JobMonitor(job, interval=0.01)
    job.monitor = monitor
    assert monitor.start().wait(timeout=60) == "COMPLETED"
    error = f"OSError: [Errno 5] Input/output error: '{tmp_path}/manifest.json'"
    # What the widget showed while the next poll ran: the error, not a frozen bar.
    assert job.shown[1:] == [(f"poller error (retrying): {error}", "warning")] * 2
    assert monitor.error == ""  # cleared once polling works again
    assert monitor.state.value.startswith("COMPLETED, exit code 0 after")


def test_monitor_thread_survives_an_error_that_persists(tmp_path):
    job = _FlakyJob(tmp_path, failures=10**9)
    monitor = JobMonitor(job, interval=0.01)
    job.monitor = monitor
    monitor.start()
    assert job.failing.wait(60)
    assert monitor._thread.is_alive()
    assert monitor.state.value.startswith("poller error (retrying): OSError: [Errno 5]")
    assert _shown(monitor.output.value).startswith("OSError: [Errno 5] Input/output error")
    monitor.stop()
    assert not monitor._thread.is_alive()


class _SilentSchedulerJob:
    """A running job whose last poll found the scheduler not answering."""

    job_id, state, exit_code, silent = "7", "RUNNING", None, True

    def __init__(self, run_dir) -> None:
        self.run_dir = run_dir
        self.manifest = {"walltime_s": 60, "note": "scheduler not answering since 10:00 (squeue)"}

    def tail(self, n: int, stream: str = "stdout") -> str:
        return ""


def test_monitor_says_when_the_scheduler_is_not_answering(tmp_path):
    monitor = JobMonitor(_SilentSchedulerJob(tmp_path))
    assert monitor.refresh() == "RUNNING"
    assert monitor.state.value.endswith(
        f"({tmp_path.name}): scheduler not answering since 10:00 (squeue)"
    )


def test_schedule_explorer_redraws_table_from_sliders():
    explorer = schedule_explorer(wait=1, warmup=1, active=2, repeat=1, steps=8)
    assert explorer.table["state"].tolist() == [
        "idle", "warmup", "record", "record_and_save", "idle", "idle", "idle", "idle",
    ]  # fmt: skip
    assert explorer.message.value == "2 of 8 steps recorded into 1 trace(s)"

    explorer.sliders["repeat"].value = 2
    traces = explorer.table["trace"].astype("float").fillna(-1).astype(int).tolist()
    assert traces == [-1, -1, 0, 0, -1, -1, 1, 1]  # -1: not recorded
    assert explorer.message.value == "4 of 8 steps recorded into 2 trace(s)"
    assert explorer.text.splitlines()[7] == "   6  record               1  ProfilerStep#6"

    explorer.sliders["skip_first"].value = 6  # first recorded step would be 8: past the loop
    assert explorer.table is None
    assert "records nothing within steps=8" in html.unescape(explorer.message.value)


def test_schedule_explorer_rejects_unknown_sliders():
    with pytest.raises(SpecError, match=r"unknown slider\(s\) \['activ'\]"):
        schedule_explorer(activ=2)


def test_form_names_an_unknown_field():
    with pytest.raises(
        SpecError, match=r"unknown field\(s\) \['rank'\]; JobSpec fields are .*'ranks_per_node'"
    ):
        job_form(system="local", rank=2)
