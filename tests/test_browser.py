"""The quickstart in a real browser: JupyterLab + headless Debian chromium driven by Playwright.

nbval sees outputs, not pixels: this test checks what a learner sees. The progress bar and the
sliders must render as widgets (not their text repr), the timeline as an image, and a slider
moved in the page must reach the kernel and come back redrawn. Screenshots go to
``test-artifacts/browser/`` (gitignored).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from browser.lab import CHROMIUM, CHROMIUM_ARGS, KERNEL_NAME, JupyterLab

from must_have import missing

pytestmark = pytest.mark.browser

RUN_ALL_TIMEOUT_MS = 90_000
STDOUT = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stdout']"
IMAGE = ".jp-OutputArea-output.jp-RenderedImage[data-mime-type='image/png'] img"


@pytest.fixture(autouse=True)
def chromium() -> None:
    if not Path(CHROMIUM).exists():
        missing(f"{CHROMIUM} not installed (.ci/run installs it)")


@pytest.fixture
def artifacts(repo: Path) -> Path:
    folder = repo / "test-artifacts" / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "quickstart-failure.png").unlink(missing_ok=True)  # only this run's failure
    return folder


@pytest.fixture
def lab(tmp_path: Path, repo: Path):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(repo / "notebooks" / "00_quickstart.ipynb", work / "00_quickstart.ipynb")
    with JupyterLab(tmp_path, work) as server:
        yield server


def _run_all(page) -> None:
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def test_quickstart_renders_widgets_and_timeline_in_chromium(lab: JupyterLab, artifacts: Path):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            blocked: list[str] = []

            def only_the_lab(route) -> None:
                if route.request.url.startswith(lab.base):
                    route.continue_()
                else:
                    blocked.append(route.request.url)
                    route.abort()

            page.route("**/*", only_the_lab)
            page.goto(lab.url("lab/tree/00_quickstart.ipynb"))
            # Our kernelspec (this venv, KINETO_LOG_LEVEL=6), connected and idle.
            idle = page.get_by_text(f"{KERNEL_NAME} | Idle")
            expect(idle).to_be_visible(timeout=60_000)

            _run_all(page)
            done = page.locator(STDOUT, has_text="Correct - well done!")
            expect(done).to_be_visible(timeout=RUN_ALL_TIMEOUT_MS)  # the last code cell ran
            expect(idle).to_be_visible(timeout=30_000)

            text = page.locator(".jp-Notebook").inner_text()
            for repr_text in ("FloatProgress(", "IntSlider(", "HBox(", "Output("):
                assert repr_text not in text, f"a widget showed as text: {repr_text}"
            assert "Traceback" not in text

            # The job's progress bar: a real widget, and it ended green (updated live).
            bar = page.locator(".widget-hprogress .progress .progress-bar")
            expect(bar.first).to_be_visible()
            expect(bar.first).to_have_class("progress-bar progress-bar-success")

            # The timeline: a PNG image in the output area, with real size.
            image = page.locator(IMAGE).first
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
            active.scroll_into_view_if_needed()
            active.locator(".noUi-handle[role=slider]").focus()
            page.keyboard.press("ArrowRight")
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

            assert not any("127.0.0.1" in url for url in blocked)
        except Exception:
            page.screenshot(path=str(artifacts / "quickstart-failure.png"))
            raise
        finally:
            browser.close()
