"""A live progress display for ``Job.wait``: a widget in Jupyter, a one-line bar in a terminal.

>>> bar = progress_display(total_s=60, label="demo", enabled=False)
>>> bar.update("RUNNING", 30.0); bar.close("COMPLETED")
"""

from __future__ import annotations

import sys


class _Silent:
    def update(self, state: str, elapsed_s: float) -> None:
        pass

    def close(self, state: str) -> None:
        pass


class _TerminalBar:
    width = 30

    def __init__(self, total_s: float, label: str) -> None:
        self.total_s, self.label = max(total_s, 1.0), label

    def update(self, state: str, elapsed_s: float) -> None:
        done = min(elapsed_s / self.total_s, 1.0)
        filled = int(done * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        sys.stderr.write(f"\r{self.label} [{bar}] {state:<9} {elapsed_s:6.1f}s")
        sys.stderr.flush()

    def close(self, state: str) -> None:
        sys.stderr.write(f"\r{self.label} {state}{' ' * (self.width + 20)}\n")
        sys.stderr.flush()


class _WidgetBar:
    def __init__(self, total_s: float, label: str) -> None:
        import ipywidgets
        from IPython.display import display

        self.bar = ipywidgets.FloatProgress(
            value=0.0, min=0.0, max=max(total_s, 1.0), description="QUEUED"
        )
        self.text = ipywidgets.Label(label)
        display(ipywidgets.HBox([self.bar, self.text]))

    def update(self, state: str, elapsed_s: float) -> None:
        self.bar.value = min(elapsed_s, self.bar.max)
        self.bar.description = state
        self.text.value = f"{elapsed_s:.0f} s"

    def close(self, state: str) -> None:
        self.bar.description = state
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
    """A display with ``update(state, elapsed_s)`` and ``close(state)``; silent when disabled."""
    if not enabled:
        return _Silent()
    if in_jupyter_kernel():
        return _WidgetBar(total_s, label)
    return _TerminalBar(total_s, label)
