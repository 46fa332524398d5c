"""Start-up set apart from the steady state on a trace without ``ProfilerStep`` steps.

Such a trace is read as one pseudo step, its whole recording, and that holds the run's
start-up when the profiler ran from the first line: the device runtime's initialisation,
the first ``cudaMalloc``/``cudaFree`` (seconds), the modules' loading. A rule that read it as
a step would call seconds of start-up "99.8 % of the step" and promise that gain every
step. Here a rank's start-up is its trace up to its first device event
(:func:`~hpcprof_kit.traces.view.startup.startup_spans`); the rules that read time on such a
trace measure the rest, and no gain is given per step: there is none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprof_kit.traces.view.run_view import RunView

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

WARMUP_ADVICE = (
    "Profile the steady state, not the start-up: wrap the loop's steps in "
    "torch.profiler.schedule(wait=1, warmup=1, active=3) and call prof.step() each step, so "
    "the trace has ProfilerStep steps and the start-up stays out of them."
)


def startup(view: RunView) -> pd.DataFrame | None:
    """Per rank of a trace without steps, its start-up and steady state
    (:attr:`~hpcprof_kit.traces.view.run_view.RunView.startup`: from the events, or from the
    per-rank summaries); None when the trace has steps or no device events."""
    spans = view.startup
    return spans if spans is not None and len(spans) else None


def steady_device_idle(spans: pd.DataFrame) -> pd.Series:
    """Per rank, the device's idle share (%) of its steady state (``spans``' ``steady_ns`` to
    ``end_ns``): the time no device event of the rank runs."""
    wall = (spans["end_ns"] - spans["steady_ns"]).astype(float)
    share = 100.0 * spans["steady_idle_ns"].astype(float) / wall.where(wall > 0)
    return share.fillna(0.0)
