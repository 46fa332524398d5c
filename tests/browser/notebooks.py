"""What each notebook must show, and which of them the browser test runs: one declared table.

A notebook belongs in the table when one of its code cells calls something that draws a plot or
shows a widget (:data:`SHOWS_SOMETHING`); nbval's run checks every such cell's outputs against
it (tests/nbval_shown.py), and the browser runs those that show a widget (:data:`IN_BROWSER`). :data:`NOTEBOOKS` says, per notebook, which
source snippet shows what; the expected counts are summed from the snippets found in the
notebook's code, so the table and the notebook cannot drift apart silently:
``test_browser_table_matches_the_notebooks`` fails when a cell that draws or shows a widget is
not declared, or a declared snippet is no longer there.

Where a picture lands in JupyterLab (``Shows.via``):

* ``"png"``: a matplotlib figure shown as ``image/png`` (``.jp-RenderedImage img``);
* ``"html"``: a ``Plot`` (``traces.plot_*``, ``timing.plot_*``) returned as a cell's value: its
  ``_repr_html_`` embeds the PNG in HTML (``.jp-RenderedHTMLCommon img``);
* ``"widget"``: drawn inside a widget (an ``Output`` widget or an ``Image`` widget).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

# A code cell matching this draws a plot or shows a widget, and must be declared below.
SHOWS_SOMETHING = re.compile(
    r"\b(?:plot_\w+|draw_plan|schedule_explorer|job_form|job_monitor|timeline_zoom)\s*\("
    r"|progress\s*=\s*True|\bwait_for\((?![^)]*progress\s*=\s*False)"
    r"|\.fig\b|\bipywidgets\b|\bplt\.show\(|\breport\.show\(|\bdisplay\(\s*(?:fig|\w*plot)"
)  # display(a_table) shows no picture: not listed

VIAS = ("png", "html", "widget")


@dataclass(frozen=True)
class Shows:
    """``snippet`` (exact text of a code cell) shows ``widgets`` widgets and ``images`` images."""

    snippet: str
    widgets: int = 0
    images: int = 0
    via: str = "png"

    def __post_init__(self) -> None:
        assert self.via in VIAS, self.via


NOTEBOOKS: dict[str, tuple[Shows, ...]] = {
    "00_quickstart": (
        Shows("wait_for(job, timeout=600)", widgets=1),  # the job's progress bar
        Shows("timeline = traces.plot_timeline(df)"),  # kept; the next cell shows it
        Shows("timeline.fig", images=1, via="png"),
        Shows("schedule_explorer(", widgets=1, images=1, via="widget"),
        Shows("job_form(", widgets=1),
    ),
    "04_profiler_schedules": (Shows("plot_schedule(", images=1, via="png"),),
    "05_reading_traces": (
        Shows("traces.plot_timeline(df)", images=1, via="html"),
        Shows("traces.plot_breakdown(bd)", images=1, via="html"),
        Shows("traces.plot_rank_heatmap(df)", images=1, via="html"),
        Shows('traces.plot_same_name(df, "aten::linear")', images=1, via="html"),
        Shows("traces.plot_memory(df)", images=1, via="html"),
        Shows("timeline_zoom(", widgets=1, images=1, via="widget"),  # issue #16's zoom
        # the run's report: the time lost (its rank x step picture), the findings, then tabs;
        # only the first pane is drawn until opened, the overview: the rank x step heatmap (a
        # rank slow in a few steps shows there), the breakdown
        Shows("report.show()", widgets=1, images=3, via="widget"),
    ),
    "06_vendor_profilers": (Shows("plot_roofline(roof)", images=1, via="html"),),
    "07_affinity_exercise": (
        Shows("draw_plan(aurora)", images=1, via="png"),
        Shows("draw_plan(depth8)", images=1, via="png"),
        Shows("draw_plan(mistake)", images=1, via="png"),
    ),
    "08_sequence_parallel_timing": (Shows("timing.plot_compute_vs_comm(t)", images=1, via="html"),),
}


# The notebooks that show only text and tables: nbval sees all they show (its run of every
# cell, in make test); the table test holds them to drawing nothing, and one that starts to
# draw must move to NOTEBOOKS.
TEXT_ONLY: tuple[str, ...] = (
    "01_device_discovery", "02_xpu_code_changes", "03_ddp_with_mpi", "09_capstone_diagnosis",
)  # fmt: skip
ALL_NOTEBOOKS: tuple[str, ...] = tuple(sorted((*NOTEBOOKS, *TEXT_ONLY)))


def shows_a_widget(stem: str) -> bool:
    """Whether a cell of notebook ``stem`` shows a widget: only a front end draws one."""
    return any(shows.widgets for shows in NOTEBOOKS.get(stem, ()))


# The notebooks the browser runs: those that show a widget. nbval's run of every notebook sees the
# images the kernel sends as PNG or inline HTML and decodes them (tests/nbval_shown.py); a widget,
# and an image inside one, exist only in the page. Between them these land an image each way
# (table_problems holds them to it), so the page's handling of each is seen too. 05 runs last, by
# when nbval's run of it (started first on the other worker) has filled Inductor's compile cache
# that both share.
IN_BROWSER: tuple[str, ...] = tuple(
    sorted(filter(shows_a_widget, NOTEBOOKS), key=lambda s: (s == "05_reading_traces", s))
)


@dataclass(frozen=True)
class Expected:
    """What a notebook must show once every cell ran."""

    widgets: int
    images: dict[str, int]  # via -> count

    @property
    def total_images(self) -> int:
        return sum(self.images.values())


def code_cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def notebooks_showing_something(folder: Path) -> list[str]:
    """Stems of the notebooks in ``folder`` with a code cell matching :data:`SHOWS_SOMETHING`."""
    return sorted(
        p.stem
        for p in folder.glob("[0-9]*.ipynb")
        if any(SHOWS_SOMETHING.search(code) for code in code_cells(p))
    )


def expected(path: Path) -> Expected:
    """The counts for the notebook at ``path``, from the snippets its code holds."""
    return expected_of(path.stem, code_cells(path))


def expected_of(stem: str, cells: list[str]) -> Expected:
    """The counts the table gives notebook ``stem`` for the code ``cells`` (all, or one)."""
    widgets, images = 0, dict.fromkeys(VIAS, 0)
    for shows in NOTEBOOKS.get(stem, ()):
        found = sum(code.count(shows.snippet) for code in cells)
        widgets += found * shows.widgets
        images[shows.via] += found * shows.images
    return Expected(widgets, images)


def table_problems(folder: Path) -> list[str]:
    """Where :data:`NOTEBOOKS` and the notebooks in ``folder`` disagree (empty: they agree)."""
    problems = []
    showing = notebooks_showing_something(folder)
    for stem in sorted(set(showing) - set(NOTEBOOKS)):
        problems.append(f"{stem}: draws or shows a widget but is not in NOTEBOOKS")
    for stem in sorted(set(NOTEBOOKS) - set(showing)):
        problems.append(f"{stem}: in NOTEBOOKS but draws nothing (or the file is gone)")
    every = sorted(p.stem for p in folder.glob("[0-9]*.ipynb"))
    for stem in sorted(set(every) - set(ALL_NOTEBOOKS)):
        problems.append(f"{stem}: in neither NOTEBOOKS nor TEXT_ONLY: nothing checks what it shows")
    for stem in sorted(set(TEXT_ONLY) - (set(every) - set(showing))):
        problems.append(f"{stem}: in TEXT_ONLY but draws something (or the file is gone)")
    landed = {shows.via for stem in IN_BROWSER for shows in NOTEBOOKS[stem] if shows.images}
    for via in sorted(set(VIAS) - landed):
        problems.append(f"no notebook the browser runs lands an image via {via!r}")
    for stem in sorted(set(NOTEBOOKS) & set(showing)):
        cells = code_cells(folder / f"{stem}.ipynb")
        for shows in NOTEBOOKS[stem]:
            if not any(shows.snippet in code for code in cells):
                problems.append(f"{stem}: declared snippet {shows.snippet!r} not found")
        for code in cells:
            if SHOWS_SOMETHING.search(code) and not any(s.snippet in code for s in NOTEBOOKS[stem]):
                first = SHOWS_SOMETHING.search(code).group(0)
                problems.append(f"{stem}: a cell calling {first!r} is not declared:\n{code}")
    return problems
