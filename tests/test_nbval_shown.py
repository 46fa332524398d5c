"""nbval_shown: the images and widgets a drawing cell's outputs hold, counted as nbval receives them."""

from __future__ import annotations

import base64
import io

import pandas as pd
import pytest
from browser.notebooks import NOTEBOOKS, Shows
from nbval_shown import declared, png_size, shown

from hpcprof_kit.traces.plots.figure import Plot, new_figure


def _figure_png() -> str:
    fig = new_figure(3, 2)
    fig.add_subplot().plot([0, 1], [1, 0])
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=50)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def test_a_matplotlib_png_decodes_with_its_size_and_a_cut_one_does_not():
    data = _figure_png()
    assert png_size(data) == (150, 100)
    assert png_size(data[:20]) is None
    assert png_size(base64.b64encode(b"<svg/>").decode()) is None


def test_outputs_are_counted_by_the_way_each_image_lands():
    fig = new_figure(3, 2)
    fig.add_subplot().bar(["a"], [1])
    plot = Plot(fig, pd.DataFrame({"x": [1]}))
    outputs = [
        {"output_type": "display_data", "data": {"image/png": _figure_png(), "text/plain": "<Figure>"}},
        {"output_type": "execute_result", "data": {"text/html": plot._repr_html_(), "text/plain": "Plot"}},
        {"output_type": "display_data", "data": {
            "application/vnd.jupyter.widget-view+json": {"model_id": "m1"}, "text/plain": "VBox()"}},
        {"output_type": "stream", "name": "stdout", "text": "done\n"},
    ]  # fmt: skip
    assert shown(outputs) == {"widgets": 1, "png": 1, "html": 1, "broken": 0}


def test_an_image_that_does_not_decode_is_counted_as_broken():
    outputs = [
        {"output_type": "display_data", "data": {"image/png": "bm90IGFuIGltYWdl"}},
        {"output_type": "execute_result", "data": {"text/html": '<img src="data:image/png;base64,AAAA"/>'}},
    ]  # fmt: skip
    assert shown(outputs) == {"widgets": 0, "png": 0, "html": 0, "broken": 2}


@pytest.mark.parametrize(
    ("stem", "source", "want"),
    [
        ("07_affinity_exercise", "draw_plan(aurora)\n", {"png": 1}),
        ("05_reading_traces", "traces.plot_timeline(df)", {"html": 1}),
        # the zoom's image is drawn inside its widget: only the browser sees it
        ("05_reading_traces", "z = timeline_zoom(df)\nz", {"widgets": 1}),
        ("00_quickstart", "print('no drawing here')", {}),
    ],
)
def test_the_table_gives_what_a_cell_must_show(stem, source, want):
    assert declared(stem, source) == {"widgets": 0, "png": 0, "html": 0, "broken": 0, **want}


def test_every_declared_drawing_is_counted_by_nbval_or_seen_by_the_browser():
    """An image is either a bundle the kernel sends (counted here) or inside a widget (a notebook
    with a widget runs in the browser): none falls between the two."""
    from browser.notebooks import IN_BROWSER

    for stem, cells in NOTEBOOKS.items():
        for shows in cells:
            assert isinstance(shows, Shows)
            if shows.via == "widget" or shows.widgets:
                assert stem in IN_BROWSER, (stem, shows.snippet)
