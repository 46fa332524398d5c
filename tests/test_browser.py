"""The notebooks in a real browser: JupyterLab + headless Debian chromium driven by Playwright.

nbval sees outputs, not pixels: these tests check what a learner sees. Every notebook that
shows a widget (the table in ``browser/notebooks.py``: a widget, and an image drawn inside one,
exist only in a front end) runs top to bottom in JupyterLab, with jobs running here (CPU, 2
ranks through Hydra mpiexec, no workshop file) into a scratch runs folder. The notebooks that
only draw figures are nbval's: its run decodes each image the kernel sends and counts them
against the same table (``nbval_shown.py``), and the notebooks run here land an image each way
a figure can reach the page. Each widget must render as a widget (not its text repr, not an error or a
"Loading widget..." left behind), each figure as a decoded image where the table says it lands,
and no cell may fail. One JupyterLab server and one browser serve the whole module; each
notebook runs once, in its own page, and the interactive tests reuse that page.

Artefacts (``test-artifacts/browser/``, gitignored): ``<notebook-stem>.png``, the whole notebook
after its run (kept pass or fail), and the interactive tests' screenshots.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from browser.lab import CHROMIUM, JupyterLab, chromium_browser
from browser.notebooks import IN_BROWSER, VIAS, expected, table_problems
from browser.page import (
    PNG_IMAGE,
    WIDGET_OUTPUT,
    full_page_screenshot,
    kernel_idle,
    nudge_slider,
    open_notebook,
    read_outputs,
    run_all,
    wait_until_ran,
    widgets_settled,
)

from must_have import missing

pytestmark = pytest.mark.browser

# One notebook, Run All to idle: most take 10-70 s here; 05 compiles a model with Inductor,
# minutes with a cold compile cache on a loaded 2-core machine (the browser group may run
# first). A deadline, not a speed test: under pytest-timeout's 600 s.
RUN_TIMEOUT_S = 540
STDOUT = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stdout']"


@pytest.fixture(scope="module")
def chromium() -> str:
    if not Path(CHROMIUM).exists():
        missing(f"{CHROMIUM} not installed (.ci/run installs it)")
    return CHROMIUM


@pytest.fixture(scope="module")
def artifacts(repo: Path) -> Path:
    folder = repo / "test-artifacts" / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*-failure.png"):  # only this run's failures
        stale.unlink()
    return folder


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, repo: Path, chromium: str):
    """One server for the module, over copies of the notebooks (the lab autosaves outputs)."""
    scratch = tmp_path_factory.mktemp("lab")
    work = scratch / "work"
    (work / "notebooks").mkdir(parents=True)
    for stem in IN_BROWSER:
        shutil.copy(repo / "notebooks" / f"{stem}.ipynb", work / "notebooks")
    (work / "examples").symlink_to(repo / "examples")  # notebooks name ../examples/...
    with JupyterLab(scratch, work) as server:
        yield server


@pytest.fixture(scope="module")
def browser(chromium: str):
    with chromium_browser() as browser:
        yield browser


@dataclass
class Ran:
    """A notebook after Run All in its page: how long it took and what went wrong, if anything."""

    stem: str
    page: object = None
    blocked: list[str] = field(default_factory=list)
    state: dict | None = None
    seconds: float = 0.0
    failure: str = ""

    @property
    def name(self) -> str:
        return f"{self.stem}.ipynb"

    def check_ran(self) -> None:
        assert not self.failure, f"{self.name}: {self.failure}"
        assert self.state is not None and not self.state["errors"], (
            f"{self.name}: a cell failed: {self.state and self.state['errors']}"
        )


class Notebooks:
    """Runs each notebook once, on first request, and keeps its page open for later tests."""

    def __init__(self, browser, lab: JupyterLab, artifacts: Path) -> None:
        self.browser, self.lab, self.artifacts = browser, lab, artifacts
        self.done: dict[str, Ran] = {}

    def run(self, stem: str) -> Ran:
        if stem not in self.done:
            self.done[stem] = self._run(stem)
        return self.done[stem]

    def _run(self, stem: str) -> Ran:
        ran = Ran(stem)
        start = time.monotonic()
        try:
            ran.page, ran.blocked = open_notebook(self.browser, self.lab, f"notebooks/{ran.name}")
            start = time.monotonic()
            run_all(ran.page)
            ran.state = wait_until_ran(ran.page, ran.name, RUN_TIMEOUT_S)
            ran.seconds = time.monotonic() - start
            widgets_settled(ran.page)
        except Exception as exc:  # kept: every test on this notebook reports it
            ran.failure = f"{type(exc).__name__}: {exc}"
            ran.seconds = ran.seconds or time.monotonic() - start
        if ran.page is not None:
            try:
                full_page_screenshot(ran.page, self.artifacts / f"{stem}.png")
            except Exception as exc:
                ran.failure += f"\nno screenshot: {type(exc).__name__}: {exc}"
        return ran

    def close(self) -> None:
        for ran in self.done.values():
            if ran.page is not None:
                ran.page.close()


@pytest.fixture(scope="module")
def notebooks(browser, lab: JupyterLab, artifacts: Path):
    runner = Notebooks(browser, lab, artifacts)
    yield runner
    runner.close()


def test_browser_table_matches_the_notebooks(repo: Path):
    """Every notebook cell that draws or shows a widget is declared in browser/notebooks.py."""
    problems = table_problems(repo / "notebooks")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("stem", IN_BROWSER)
def test_notebook_renders_in_chromium(stem: str, notebooks: Notebooks, lab: JupyterLab):
    ran = notebooks.run(stem)
    ran.check_ran()
    want = expected(lab.root_dir / "notebooks" / ran.name)
    out = read_outputs(ran.page, ran.name)
    assert not out.problems, f"{ran.name}:\n" + "\n".join(out.problems)
    shown = ran.state["widgets"]  # widget outputs the kernel sent, by the notebook model
    assert shown == want.widgets, f"{ran.name}: the kernel showed {shown} widget(s)"
    assert len(out.widgets) == shown, f"{ran.name}: rendered widgets {out.widgets}"
    got = {via: out.images_via(via) for via in (*VIAS, "other")}
    assert got == {**want.images, "other": 0}, f"{ran.name}: images {out.images}"
    assert not any("127.0.0.1" in url for url in ran.blocked), ran.blocked
    print(f"{ran.name}: ran in {ran.seconds:.1f} s")


def test_quickstart_renders_widgets_and_timeline_in_chromium(notebooks: Notebooks, artifacts: Path):
    """The quickstart's widgets work in the page: sliders redraw, the form submits a job."""
    from playwright.sync_api import expect

    ran = notebooks.run("00_quickstart")
    ran.check_ran()
    page, idle = ran.page, kernel_idle(ran.page)
    try:
        # The check answered the learner's blank prediction with a hint, not the answer.
        expect(page.locator(STDOUT, has_text="Not yet. Hint:")).to_be_visible()
        expect(page.locator(STDOUT, has_text="Correct - well done!")).to_have_count(0)

        # The job's progress bar: a real widget, and it ended green (updated live).
        bar = page.locator(".widget-hprogress .progress .progress-bar")
        expect(bar.first).to_be_visible()
        expect(bar.first).to_have_class("progress-bar progress-bar-success")

        # The timeline: a PNG image in the output area, with real size.
        image = page.locator(f".jp-OutputArea-output{PNG_IMAGE}").first
        image.scroll_into_view_if_needed()
        expect(image).to_be_visible()
        box = image.bounding_box()
        assert box is not None and box["width"] > 600 and box["height"] > 80
        page.screenshot(path=str(artifacts / "quickstart-timeline.png"))

        # The schedule explorer: six sliders; moving one redraws through the kernel.
        sliders = page.locator(".widget-slider.widget-hslider")
        expect(sliders).to_have_count(6)
        message = page.locator(".widget-html", has_text="steps recorded into")
        expect(message).to_have_text("2 of 6 steps recorded into 1 trace(s)")
        picture = page.locator(".widget-output .jp-RenderedImage img").first
        expect(picture).to_be_visible()
        drawn_before = picture.get_attribute("src")
        active = sliders.filter(has_text="active")
        nudge_slider(page, active)
        expect(active.locator(".widget-readout")).to_have_text("3")
        expect(message).to_have_text("3 of 6 steps recorded into 1 trace(s)")
        expect(picture).not_to_have_attribute("src", drawn_before)  # redrawn by the kernel
        expect(idle).to_be_visible(timeout=30_000)
        page.screenshot(path=str(artifacts / "quickstart-explorer.png"))
        bar.first.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "quickstart-progress.png"))

        # The job form: a field edited in the page re-renders the script in the kernel;
        # Submit runs it, and the monitor's polling thread updates the page until the end.
        preview = page.locator(".widget-html pre", has_text="mpiexec -n")
        preview.scroll_into_view_if_needed()
        expect(preview).to_contain_text("mpiexec -n 2 \\")
        ranks_field = page.locator(".widget-text", has_text="ranks per node").locator("input")
        ranks_field.fill("1")
        ranks_field.press("Enter")
        expect(preview).to_contain_text("mpiexec -n 1 \\")
        page.locator(".widget-button", has_text="Submit").click()
        state = page.locator(".widget-label", has_text="exit code")
        expect(state).to_contain_text("COMPLETED, exit code 0", timeout=60_000)
        expect(page.locator(".widget-html pre", has_text="epoch 1/1")).to_be_visible()
        state.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "quickstart-form.png"))

        assert not any("127.0.0.1" in url for url in ran.blocked)
    except Exception:
        page.screenshot(path=str(artifacts / "quickstart-failure.png"))
        raise


def test_zoom_widget_redraws_in_browser(notebooks: Notebooks, artifacts: Path):
    """Notebook 05's timeline zoom (``timeline_zoom(df)``, hpcprof_kit/widgets/zoom.py): moving
    its "step" slider in the page redraws the picture under it through the kernel."""
    from playwright.sync_api import expect

    ran = notebooks.run("05_reading_traces")
    ran.check_ran()
    page = ran.page
    # The brief's contract is an IntSlider described "step"; "steps" (an IntRangeSlider over a
    # window of steps) is accepted too: its lower handle moves the same way.
    step_label = page.locator(".widget-label", has_text=re.compile(r"^\s*steps?\s*$"))
    step = page.locator(".widget-slider.widget-hslider").filter(has=step_label)
    if step.count() == 0:
        pytest.fail(
            f"{ran.name} shows no slider labelled 'step(s)': the timeline zoom "
            "(hpcprof_kit.widgets.zoom.timeline_zoom(df), issue #16) is not in the notebook yet"
        )
    try:
        expect(step).to_have_count(1)
        zoom = page.locator(WIDGET_OUTPUT).filter(has=step).first  # the slider's widget
        picture = zoom.locator("img").first
        picture.scroll_into_view_if_needed()
        expect(picture).to_be_visible()
        drawn_before = picture.get_attribute("src")
        handle = step.locator(".noUi-handle[role=slider]").first
        value_before = handle.get_attribute("aria-valuenow")
        at_end = value_before == handle.get_attribute("aria-valuemax")
        nudge_slider(page, step, key="ArrowLeft" if at_end else "ArrowRight")
        expect(handle).not_to_have_attribute("aria-valuenow", value_before)
        expect(picture).not_to_have_attribute("src", drawn_before, timeout=30_000)
        expect(kernel_idle(page)).to_be_visible(timeout=30_000)
        page.screenshot(path=str(artifacts / "reading-traces-zoom.png"))
    except Exception:
        page.screenshot(path=str(artifacts / "reading-traces-zoom-failure.png"))
        raise
