"""Driving a notebook in a JupyterLab page with Playwright: open, run all, wait, read, picture.

Waits gate on the page's own state (the notebook model and the kernel status the app shows
through ``window.jupyterapp``, the cells' prompts in the DOM), never on fixed sleeps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from browser.lab import KERNEL_NAME, JupyterLab

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
# A widget's output node carries no data-mime-type: the widget view is its child.
WIDGET_OUTPUT = ".jp-OutputArea-output:has(> .jupyter-widgets)"
PNG_IMAGE = ".jp-RenderedImage[data-mime-type='image/png'] img"
# A widget shown as its text repr (no widget manager in the page), e.g. "IntSlider(value=1, ...".
WIDGET_REPR = re.compile(
    r"\b(?:Int|Float)(?:Slider|RangeSlider|Progress|Text)\(|\b[HV]Box\(children="
    r"|\bOutput\((?:layout|outputs)=|\bButton\((?:description|layout)=|\bHTML\(value="
)
WIDGET_TROUBLE = ("Error displaying widget", "Loading widget...", "model not found")
SCREENSHOT_MAX_HEIGHT = 16_000  # Chromium draws no taller page in one capture
VIEWPORT = {"width": 1400, "height": 1000}

# The notebook panel of the file whose path ends with `name`, found through the app.
_PANEL = """
function panelOf(name) {
  const app = window.jupyterapp;
  if (!app) return null;
  for (const w of app.shell.widgets('main')) {
    if (w.context && w.content && w.content.model && w.context.path.endsWith(name)) return w;
  }
  return null;
}
"""

_STATE = (
    "(name) => {"
    + _PANEL
    + f"const WIDGET_MIME = '{WIDGET_MIME}';"
    + """
  const panel = panelOf(name);
  if (!panel) return null;
  const code = panel.content.model.toJSON().cells.filter(c => c.cell_type === 'code');
  const dom = panel.content.node.querySelectorAll('.jp-CodeCell');
  // A cell whose source is hidden shows no prompt: the others must each show their count.
  const prompts = [...panel.content.node.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
    .map(e => e.textContent.trim());
  const errors = [];
  let widgets = 0;
  code.forEach((c, i) => c.outputs.forEach(o => {
    if (o.output_type === 'error') errors.push(`code cell ${i + 1}: ${o.ename}: ${o.evalue}`);
    if (o.data && o.data[WIDGET_MIME]) widgets += 1;
  }));
  return {
    cells: code.length,
    attached: dom.length,
    counts: code.map(c => c.execution_count),
    prompts,
    errors,
    widgets,
    kernel: panel.sessionContext.kernelDisplayStatus,
  };
}"""
)

# Finished: the kernel is idle and every code cell has its count and a numbered prompt, or a
# cell failed (Run All then stops: the cells after it are aborted).
_FINISHED = (
    "(name) => { const s = (" + _STATE + ")(name); if (!s || s.kernel !== 'idle') return false;"
    " if (s.errors.length) return true;"
    " return s.cells > 0 && s.attached === s.cells"
    " && s.counts.every(n => Number.isInteger(n))"
    " && s.prompts.every(p => /^\\[\\d+\\]:$/.test(p)); }"
)

_OUTPUTS = (
    "(name) => {"
    + _PANEL
    + """
  const root = panelOf(name).content.node;
  // Outputs of the cells themselves, not those inside an Output widget.
  const top = [...root.querySelectorAll('.jp-OutputArea-output')]
    .filter(e => !e.parentElement.closest('.jupyter-widgets'));
  const widgets = top.filter(e => e.querySelector(':scope > .jupyter-widgets'))
    .map(e => ({text: e.innerText.slice(0, 300)}));
  const images = [...root.querySelectorAll('.jp-OutputArea-output img')].map(img => {
    const box = img.getBoundingClientRect();
    let via = 'other';
    if (img.closest('.jupyter-widgets')) via = 'widget';
    else if (img.closest(".jp-RenderedImage[data-mime-type='image/png']")) via = 'png';
    else if (img.closest('.jp-RenderedHTMLCommon')) via = 'html';
    return {
      via, src: img.src.slice(0, 40), complete: img.complete,
      natural: [img.naturalWidth, img.naturalHeight], shown: [box.width, box.height],
    };
  });
  const stderr = top.filter(e => e.dataset.mimeType === 'application/vnd.jupyter.stderr')
    .map(e => e.innerText);
  return {widgets, images, stderr, text: root.innerText};
}"""
)


@dataclass
class Outputs:
    """What a notebook's outputs look like in the page."""

    widgets: list[dict]
    images: list[dict]
    stderr: list[str]
    text: str
    problems: list[str] = field(default_factory=list)

    def images_via(self, via: str) -> int:
        return sum(1 for image in self.images if image["via"] == via)


def only_the_lab(page, lab: JupyterLab) -> list[str]:
    """Abort every request that does not go to ``lab``; returns the list of blocked URLs."""
    blocked: list[str] = []

    def route(route) -> None:
        if route.request.url.startswith(lab.base):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    page.route("**/*", route)
    return blocked


def open_notebook(browser, lab: JupyterLab, path: str):
    """A new page on the notebook at ``path`` (under the server root), its kernel idle, and the
    list that collects the requests it blocked (anything not for the lab).

    Each notebook gets a workspace of its own, so one page never reopens another's tabs.
    """
    from playwright.sync_api import expect

    page = browser.new_page(viewport=VIEWPORT)
    blocked = only_the_lab(page, lab)
    workspace = re.sub(r"[^A-Za-z0-9]+", "-", Path(path).stem)
    page.goto(lab.url(f"lab/workspaces/{workspace}/tree/{path}"))
    # Our kernelspec (this venv, KINETO_LOG_LEVEL=6, no workshop), connected and idle.
    expect(kernel_idle(page)).to_be_visible(timeout=60_000)
    page.wait_for_function("(n) => !!(" + _STATE + ")(n)", arg=Path(path).name)
    return page, blocked


def kernel_idle(page):
    return page.get_by_text(f"{KERNEL_NAME} | Idle")


def run_all(page, clear_first: bool = True) -> None:
    """Run every cell from the menus; first clear the stored outputs and counts, so what the
    test reads afterwards comes from this run only."""
    if clear_first:
        page.get_by_role("menuitem", name="Edit", exact=True).click()
        page.get_by_role("menuitem", name="Clear Outputs of All Cells", exact=True).click()
        page.wait_for_function(
            "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]"
            ".every(e => e.textContent.trim() === '[ ]:')"
        )
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def cell_state(page, name: str) -> dict:
    return page.evaluate(_STATE, name)


def wait_until_ran(page, name: str, timeout_s: float) -> dict:
    """Wait until every code cell of ``name`` ran (or one failed) and the kernel is idle."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(_FINISHED, arg=name, timeout=timeout_s * 1000, polling=250)
    except PlaywrightTimeout as exc:
        raise AssertionError(
            f"{name} did not finish in {timeout_s:.0f} s: {cell_state(page, name)}"
        ) from exc
    return cell_state(page, name)


def widgets_settled(page) -> None:
    """Wait until no widget is still loading (the views render after their outputs arrive)."""
    from playwright.sync_api import expect

    loading = page.locator(".jp-OutputArea-output", has_text="Loading widget...")
    expect(loading).to_have_count(0, timeout=30_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-OutputArea-output img')].every(i => i.complete)",
        timeout=30_000,
    )


def read_outputs(page, name: str) -> Outputs:
    found = page.evaluate(_OUTPUTS, name)
    out = Outputs(found["widgets"], found["images"], found["stderr"], found["text"])
    for trouble in WIDGET_TROUBLE:
        if trouble in out.text:
            at = out.text.index(trouble)
            out.problems.append(f"a widget shows {trouble!r}: {out.text[at : at + 120]!r}")
    shown_as_text = WIDGET_REPR.search(out.text)
    if shown_as_text:
        at = shown_as_text.start()
        out.problems.append(f"a widget showed as text: {out.text[at : at + 80]!r}")
    for i, image in enumerate(out.images, 1):
        natural_w, natural_h = image["natural"]
        shown_w, shown_h = image["shown"]
        if not (image["complete"] and natural_w > 0 and natural_h > 0):
            out.problems.append(f"image {i} ({image['via']}) did not decode: {image}")
        elif shown_w < 100 or shown_h < 50:
            out.problems.append(f"image {i} ({image['via']}) is too small in the page: {image}")
        if not image["src"].startswith(("data:image/png", "blob:")):
            out.problems.append(f"image {i} is not an inline PNG: {image['src']!r}")
    for text in out.stderr:
        if "Traceback" in text:
            out.problems.append(f"a traceback on stderr:\n{text[-1500:]}")
    return out


def full_page_screenshot(page, path: Path) -> None:
    """The whole notebook in one PNG: the viewport grows to the notebook's height for it."""
    extra = page.evaluate(
        """() => Math.max(0, ...[...document.querySelectorAll('.jp-NotebookPanel *')]
            .filter(e => /(auto|scroll)/.test(getComputedStyle(e).overflowY))
            .map(e => e.scrollHeight - e.clientHeight))"""
    )
    height = min(VIEWPORT["height"] + int(extra), SCREENSHOT_MAX_HEIGHT)
    page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
    try:
        if height < SCREENSHOT_MAX_HEIGHT:  # the notebook fits: wait until it no longer scrolls
            page.wait_for_function(
                """() => [...document.querySelectorAll('.jp-NotebookPanel *')]
                    .filter(e => /(auto|scroll)/.test(getComputedStyle(e).overflowY))
                    .every(e => e.scrollHeight - e.clientHeight <= 2)""",
                timeout=10_000,
            )
        page.screenshot(path=str(path), full_page=True)
    finally:
        page.set_viewport_size(VIEWPORT)


def nudge_slider(page, slider, key: str = "ArrowRight") -> None:
    """Move an ipywidgets slider one step, as a learner does: focus its handle, press ``key``."""
    slider.scroll_into_view_if_needed()
    slider.locator(".noUi-handle[role=slider]").first.focus()  # a range slider's lower one
    page.keyboard.press(key)
