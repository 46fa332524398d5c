"""Optional ipywidgets fronts over the kit's own objects (ipywidgets is imported lazily).

>>> from hpcprof_kit.widgets import job_form, job_monitor, schedule_explorer   # doctest: +SKIP
>>> form = job_form(system="local", ranks_per_node=2, profile=True)             # doctest: +SKIP
>>> form      # the fields, the live script preview, a Submit button   # doctest: +SKIP
>>> job = form.submit()                                                          # doctest: +SKIP
>>> job_monitor(job)   # progress, state and output tail, kept live           # doctest: +SKIP
>>> schedule_explorer(steps=8)   # sliders redraw the schedule and its table  # doctest: +SKIP
>>> timeline_zoom(df)   # a steps slider redraws the timeline and its lanes table  # doctest: +SKIP

Each front is a small class holding its widgets as attributes (``form.nodes``,
``form.preview``, ``monitor.bar``, ``explorer.sliders``, ``zoom.slider``), so its logic can be driven headless:
set ``.value``, call ``button.click()``, read the text it shows.
"""

from __future__ import annotations

from hpcprof_kit.widgets.explorer import ScheduleExplorer, schedule_explorer
from hpcprof_kit.widgets.form import JobForm, job_form
from hpcprof_kit.widgets.monitor import JobMonitor, job_monitor
from hpcprof_kit.widgets.zoom import TimelineZoom, timeline_zoom

__all__ = [
    "JobForm",
    "JobMonitor",
    "ScheduleExplorer",
    "TimelineZoom",
    "job_form",
    "job_monitor",
    "schedule_explorer",
    "timeline_zoom",
]
