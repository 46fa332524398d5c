"""The timeline zoom widget, driven headless: move the slider or call redraw, read what it shows."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from pathlib import Path

import pytest

from hpcprof_kit import traces
from hpcprof_kit.errors import SpecError
from hpcprof_kit.widgets import timeline_zoom
from hpcprof_kit.widgets.zoom import trace_steps

DDP = Path(__file__).parent / "fixtures" / "traces" / "ddp_cpu_2rank"


@pytest.fixture(scope="module")
def ddp():
    return traces.load(DDP, cache=False)


def test_zoom_starts_on_every_step_and_redraws_one_at_its_own_level_of_detail(ddp):
    zoom = timeline_zoom(ddp)
    assert trace_steps(ddp) == [2, 3]
    assert (zoom.slider.description, zoom.slider.value) == ("steps", (2, 3))
    everything = zoom.plot.table
    assert zoom.message.value.startswith(f"steps 2-3: {int(everything['events'].sum()):,} slices")

    zoom.redraw(3)
    lanes, bars = zoom.plot.table, zoom.plot.bars
    assert zoom.message.value.startswith("step 3: ")
    assert int(lanes["events"].sum()) < int(everything["events"].sum())  # the table follows
    # zoomed in, fewer slices fall under a pixel: a smaller share of them is merged
    share = lanes["merged"].sum() / lanes["events"].sum()
    assert share < everything["merged"].sum() / everything["events"].sum()
    assert {"forward", "backward", "optimizer"} <= set(bars["label"])


def test_moving_the_slider_redraws(ddp):
    zoom = timeline_zoom(ddp, max_depth=1)
    zoom.slider.value = (2, 2)
    assert zoom.message.value.startswith("step 2: ")
    assert zoom.plot.table["depth"].max() == 1  # plot arguments carry over


def test_a_trace_without_steps_says_what_to_do_instead(ddp):
    no_steps = ddp[~ddp["name"].astype(str).str.startswith("ProfilerStep#")].copy()
    no_steps["name"] = no_steps["name"].cat.remove_unused_categories()
    with pytest.raises(SpecError, match=r"no ProfilerStep#N events to zoom to; use plot_timeline"):
        timeline_zoom(no_steps)
