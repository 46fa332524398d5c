"""``schedule_explorer()``: sliders for a torch.profiler schedule that redraw its picture and table.

The table and the picture come from :mod:`hpcprof_kit.profiling` (``schedule_table``,
``plot_schedule``); the explorer only wires sliders to them.
"""

from __future__ import annotations

import html
from typing import Any

from hpcprof_kit.errors import KitError, SpecError

# slider name -> (start value, lowest, highest)
SLIDERS: dict[str, tuple[int, int, int]] = {
    "wait": (1, 0, 5),
    "warmup": (1, 0, 5),
    "active": (2, 1, 6),
    "repeat": (1, 0, 4),
    "skip_first": (0, 0, 6),
    "steps": (8, 1, 24),
}


class ScheduleExplorer:
    """Widgets: ``sliders`` (name -> IntSlider), ``out`` (picture and table), ``message``."""

    def __init__(self, **start: int) -> None:
        import ipywidgets as w

        unknown = sorted(set(start) - set(SLIDERS))
        if unknown:
            raise SpecError(
                f"schedule_explorer got unknown slider(s) {unknown}; known: {list(SLIDERS)}"
            )
        self.sliders = {
            name: w.IntSlider(value=start.get(name, v), min=lo, max=max(hi, start.get(name, v)), description=name)
            for name, (v, lo, hi) in SLIDERS.items()
        }  # fmt: skip
        self.message = w.HTML()
        self.out = w.Output()
        self.table = None
        for slider in self.sliders.values():
            slider.observe(lambda _change: self.redraw(), names="value")
        self.widget = w.HBox([w.VBox([*self.sliders.values(), self.message]), self.out])
        self.redraw()

    def _repr_mimebundle_(self, **kwargs: Any):
        return self.widget._repr_mimebundle_(**kwargs)

    @property
    def values(self) -> dict[str, int]:
        return {name: s.value for name, s in self.sliders.items()}

    @property
    def text(self) -> str:
        """The schedule as plain text, the way ``hpcprof-kit schedule`` prints it."""
        from hpcprof_kit.profiling import format_schedule, schedule_steps

        return format_schedule(schedule_steps(**self.values)) if self.table is not None else ""

    def redraw(self) -> None:
        """Recompute the table and picture from the sliders; an invalid schedule shows why."""
        import matplotlib.pyplot as plt

        from hpcprof_kit.profiling import plot_schedule

        try:
            fig, table = plot_schedule(**self.values)
        except KitError as exc:
            self.table = None
            self.message.value = f'<span style="color:#b00020">{html.escape(str(exc))}</span>'
            self.out.outputs = ()
            return
        self.table = table
        recorded = int(table["trace"].notna().sum())
        self.message.value = (
            f"{recorded} of {len(table)} steps recorded into {table['trace'].nunique()} trace(s)"
        )
        # Contents as data, not display() captured inside `with self.out`: that capture made a
        # headless client (nbconvert, papermill, nbval) take the cell's reply only at its
        # timeout (see widgets/zoom.py).
        self.out.outputs = ()
        self.out.append_display_data(fig)
        self.out.append_display_data(table)
        plt.close(fig)  # the Output widget keeps the picture; pyplot need not


def schedule_explorer(**start: int) -> ScheduleExplorer:
    """Sliders for wait, warmup, active, repeat, skip_first and steps over the schedule picture.

    >>> explorer = schedule_explorer(wait=1, warmup=1, active=2, repeat=1)   # doctest: +SKIP
    >>> explorer.sliders["active"].value = 3   # doctest: +SKIP
    >>> explorer.table["state"].tolist()                                      # doctest: +SKIP
    ['idle', 'warmup', 'record', 'record', 'record_and_save', 'idle', 'idle', 'idle']
    """
    return ScheduleExplorer(**start)
