"""``timeline_zoom(df)``: a steps slider over the timeline; each window is redrawn at its own
level of detail, and the lanes table under it follows the window.

The picture and both tables come from :func:`hpcprof_kit.traces.plot_timeline`; the widget
only wires a slider to its ``step=`` argument.
"""

from __future__ import annotations

import html
from typing import Any

from hpcprof_kit.errors import KitError, SpecError


def trace_steps(df: Any) -> list[int]:
    """The ProfilerStep numbers in a trace table, in order.

    >>> from hpcprof_kit.traces import load      # doctest: +SKIP
    >>> trace_steps(load("runs/x/traces"))       # doctest: +SKIP
    [2, 3]
    """
    from hpcprof_kit.traces.analyses.breakdown import STEP_PREFIX

    names = (str(n) for n in df["name"].cat.categories)
    tails = (n[len(STEP_PREFIX) :] for n in names if n.startswith(STEP_PREFIX))
    return sorted({int(t) for t in tails if t.isdigit()})


class TimelineZoom:
    """Widgets: ``slider`` (an IntRangeSlider of steps), ``out`` (picture and lanes table),
    ``message``; ``plot`` is the last timeline drawn (``plot.table``, ``plot.bars``)."""

    def __init__(self, df: Any, steps: tuple[int, int] | None = None, **plot_args: Any) -> None:
        import ipywidgets as w

        self.df, self.plot_args, self.plot = df, plot_args, None
        self.steps = trace_steps(df)
        if not self.steps:
            raise SpecError(
                "this trace table has no ProfilerStep#N events to zoom to; use "
                "plot_timeline(df, start=..., end=...) with times in ms instead"
            )
        lo, hi = self.steps[0], self.steps[-1]
        self.slider = w.IntRangeSlider(value=steps or (lo, hi), min=lo, max=hi, description="steps")
        self.message = w.HTML()
        self.out = w.Output()
        self.slider.observe(lambda change: self.redraw(change["new"]), names="value")
        self.widget = w.VBox([self.slider, self.message, self.out])
        self.redraw(self.slider.value)

    def _repr_mimebundle_(self, **kwargs: Any):
        return self.widget._repr_mimebundle_(**kwargs)

    def redraw(self, step: int | tuple[int, int]) -> None:
        """Draw steps ``step`` (one number or ``(first, last)``) at their own level of detail."""
        from hpcprof_kit.traces.plots.timeline import plot_timeline

        window = (step, step) if isinstance(step, int) else tuple(step)
        try:
            self.plot = plot_timeline(self.df, step=window, **self.plot_args)
        except KitError as exc:
            self.plot = None
            self.message.value = f'<span style="color:#b00020">{html.escape(str(exc))}</span>'
            self.out.outputs = ()
            return
        lanes = self.plot.table
        what = f"step {window[0]}" if window[0] == window[1] else f"steps {window[0]}-{window[1]}"
        self.message.value = (
            f"{what}: {int(lanes['events'].sum()):,} slices in {int(lanes['bars'].sum()):,} bars "
            f"({int(lanes['merged'].sum()):,} merged at this zoom)"
        )
        # Set the Output's contents as data instead of capturing display() inside `with self.out`:
        # capture makes the kernel flip the widget's msg_id over comm messages during the cell,
        # and a headless client (nbconvert, papermill, nbval) then sometimes took the cell's
        # reply only at its timeout. Data needs no capture, in JupyterLab or headless.
        self.out.outputs = ()
        self.out.append_display_data(self.plot)  # the picture, then the lanes table


def timeline_zoom(df: Any, steps: tuple[int, int] | None = None, **plot_args: Any) -> TimelineZoom:
    """A steps slider over :func:`~hpcprof_kit.traces.plot_timeline` (same keyword arguments).

    >>> zoom = timeline_zoom(df, max_depth=6)      # doctest: +SKIP
    >>> zoom.redraw(3)                             # what moving the slider to 3..3 does  # doctest: +SKIP
    >>> zoom.plot.bars.query("depth == 1")["name"].tolist()        # doctest: +SKIP
    ['enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__', 'forward', 'backward', ...]
    """
    return TimelineZoom(df, steps, **plot_args)
