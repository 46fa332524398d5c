"""``job_monitor(job)``: a progress bar, the job's state and the tail of its output, kept live.

A background thread polls the job about once a second, so the notebook stays free while the
job runs; widget updates from that thread reach the browser through the kernel's comm channel.
An error while polling (an unreadable run directory, a scheduler command that breaks) is shown
in the widget and polling goes on, slower; the widget never freezes silently.
"""

from __future__ import annotations

import html
import threading
import time
from typing import Any

from hpcprof_kit.jobs.backends import FINAL_STATES as FINAL

_STYLE = {"COMPLETED": "success", "RUNNING": "info", "QUEUED": ""}
MAX_ERROR_INTERVAL_S = 30.0  # polls after errors back off up to this


class JobMonitor:
    """Widgets showing one job: ``bar`` (time against walltime), ``state``, ``output``."""

    def __init__(self, job: Any, interval: float = 1.0, lines: int = 12) -> None:
        import ipywidgets as w

        self.job, self.interval, self.lines = job, interval, lines
        walltime = float(job.manifest.get("walltime_s", 600))
        self.bar = w.FloatProgress(value=0.0, min=0.0, max=max(walltime, 1.0), description="QUEUED")
        self.state = w.Label(value=f"{job.job_id}  {job.run_dir.name}")
        self.output = w.HTML(value="<pre></pre>")
        self.widget = w.VBox([w.HBox([self.bar, self.state]), self.output])
        self._start = time.monotonic()
        self._thread: threading.Thread | None = None
        self.error = ""  # the last poller error shown, "" while polling works
        self._stop = threading.Event()

    def _repr_mimebundle_(self, **kwargs: Any):
        return self.widget._repr_mimebundle_(**kwargs)

    def refresh(self) -> str:
        """Poll the job once and show what it says; returns its state."""
        state = self.job.state
        elapsed = time.monotonic() - self._start
        self.bar.description = state
        self.bar.value = self.bar.max if state in FINAL else min(elapsed, self.bar.max)
        self.bar.bar_style = _STYLE.get(state, "danger")
        code = self.job.exit_code if state in FINAL else None
        ended = f", exit code {code}" if code is not None else ""
        # Why it ended (or why the state may be stale): the manifest's note.
        why = state in FINAL or getattr(self.job, "silent", False)
        data = self.job.manifest
        note = data.get("note", "") if why else ""
        if data.get("comment") and state not in FINAL:  # why it waits (PBS's comment)
            note = f"{note}; {data['comment']}" if note else data["comment"]
        shown = f"{state}{ended} after {elapsed:.0f} s  ({self.job.run_dir.name})"
        self.state.value = f"{shown}: {note}" if note else shown
        tail = self.job.tail(self.lines)
        if state not in ("COMPLETED", "RUNNING"):
            errors = self.job.tail(self.lines, stream="stderr")
            tail = f"{tail}\n{errors}".strip()
        self.output.value = f"<pre>{html.escape(tail)}</pre>"
        return state

    def show_error(self, exc: BaseException) -> None:
        """Show why polling failed; the last state stays on the bar."""
        self.error = f"{type(exc).__name__}: {exc}"
        self.bar.bar_style = "warning"
        self.state.value = f"poller error (retrying): {self.error}"
        self.output.value = f"<pre>{html.escape(self.error)}</pre>"

    def _poll(self) -> None:
        interval = self.interval
        while True:
            try:
                state = self.refresh()
            except Exception as exc:  # shown in the widget; a dead thread would freeze it
                self.show_error(exc)
                interval = min(interval * 2, max(self.interval, MAX_ERROR_INTERVAL_S))
            else:
                self.error, interval = "", self.interval
                if state in FINAL:
                    return
            if self._stop.wait(interval):
                return

    def start(self) -> JobMonitor:
        """Poll in a background thread until the job ends (idempotent)."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._poll, name="hpcprof-job-monitor", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling (the widgets keep what they last showed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def wait(self, timeout: float | None = None) -> str:
        """Block until the polling thread has seen the job end; returns the state shown."""
        self.start()
        assert self._thread is not None
        self._thread.join(timeout)
        return self.bar.description


def job_monitor(job: Any, interval: float = 1.0, lines: int = 12) -> JobMonitor:
    """A live monitor of ``job`` (polling starts at once).

    >>> from hpcprof_kit.jobs import JobSpec, submit                             # doctest: +SKIP
    >>> monitor = job_monitor(submit(JobSpec(command=["echo", "hi"], ranks_per_node=1)))  # doctest: +SKIP
    >>> monitor.wait(), monitor.output.value                                     # doctest: +SKIP
    ('COMPLETED', '<pre>hi</pre>')
    """
    return JobMonitor(job, interval=interval, lines=lines).start()
