"""Live progress for ``Job.wait``: a widget in Jupyter, a bar in a terminal, lines in a log.

The job side reports how far it is with :func:`report_progress` (rank 0 of an app writes
``progress.json`` into its run directory); the waiting side reads it with :func:`read_progress`.

>>> bar = progress_display(total_s=60, label="demo", enabled=False)
>>> bar.update("RUNNING", 30.0); bar.close("COMPLETED")
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from hpcprof_kit.paths import RUN_DIR_VAR

PROGRESS_FILE = "progress.json"


def report_progress(done: int, total: int, unit: str = "steps") -> None:
    """Record ``done`` of ``total`` in this job's run directory (no-op outside a kit job).

    >>> report_progress(3, 10)   # outside a job: nothing happens
    """
    run_dir = os.environ.get(RUN_DIR_VAR)
    if not run_dir:
        return
    path = Path(run_dir) / PROGRESS_FILE
    tmp = path.with_name(f".{PROGRESS_FILE}.{os.getpid()}")
    try:
        tmp.write_text(json.dumps({"done": int(done), "total": int(total), "unit": unit}))
        os.replace(tmp, path)  # atomic: a reader never sees half a file
    except OSError:
        pass  # progress is a courtesy; never fail the job for it


def read_progress(run_dir: str | os.PathLike[str]) -> tuple[float, str] | None:
    """(fraction done, "3/10 steps") from a run directory, or None when nothing was reported."""
    try:
        data = json.loads((Path(run_dir) / PROGRESS_FILE).read_text())
        done, total = int(data["done"]), int(data["total"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if total <= 0:
        return None
    return min(done / total, 1.0), f"{done}/{total} {data.get('unit', 'steps')}"


class _Silent:
    def update(self, state: str, elapsed_s: float, progress=None) -> None:
        pass

    def close(self, state: str) -> None:
        pass


class _TerminalBar:
    """A one-line bar redrawn in place on a terminal; one line per change in a log file."""

    width = 30

    def __init__(self, total_s: float, label: str) -> None:
        self.total_s, self.label = max(total_s, 1.0), label
        self.tty = sys.stderr.isatty()
        self.last = None

    def update(self, state: str, elapsed_s: float, progress=None) -> None:
        fraction, detail = progress if progress else (None, "")
        if not self.tty:
            if (state, detail) != self.last:
                self.last = (state, detail)
                sys.stderr.write(f"{self.label} {state} {detail}".rstrip() + "\n")
            return
        if fraction is None:  # no report from the job: show time against the walltime
            fraction = min(elapsed_s / self.total_s, 1.0)
        filled = int(fraction * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        sys.stderr.write(f"\r{self.label} [{bar}] {state:<9} {detail:>12} {elapsed_s:6.1f}s")
        sys.stderr.flush()

    def close(self, state: str) -> None:
        end = "\r" if self.tty else ""
        sys.stderr.write(
            f"{end}{self.label} {state}{' ' * (self.width + 30) if self.tty else ''}\n"
        )
        sys.stderr.flush()


class _WidgetBar:
    def __init__(self, total_s: float, label: str) -> None:
        import ipywidgets
        from IPython.display import display

        self.total_s = max(total_s, 1.0)
        self.bar = ipywidgets.FloatProgress(value=0.0, min=0.0, max=1.0, description="QUEUED")
        self.text = ipywidgets.Label(label)
        display(ipywidgets.HBox([self.bar, self.text]))

    def update(self, state: str, elapsed_s: float, progress=None) -> None:
        fraction, detail = progress if progress else (min(elapsed_s / self.total_s, 1.0), "")
        self.bar.value = fraction
        self.bar.description = state
        self.text.value = f"{detail} {elapsed_s:.0f} s".strip()

    def close(self, state: str) -> None:
        self.bar.description = state
        if state == "COMPLETED":
            self.bar.value = 1.0
        self.bar.bar_style = {"COMPLETED": "success", "RUNNING": "info"}.get(state, "danger")


def in_jupyter_kernel() -> bool:
    """True when running inside a Jupyter kernel with ipywidgets importable."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def progress_display(total_s: float, label: str, enabled: bool = True):
    """A display with ``update(state, elapsed_s, progress)`` and ``close(state)``."""
    if not enabled:
        return _Silent()
    if in_jupyter_kernel():
        return _WidgetBar(total_s, label)
    return _TerminalBar(total_s, label)
