"""The HTML report (issue #23) in headless Chromium: every pane of the shared Aurora XPU
sample, a shared CUDA trace and an 8-rank planted run opens from the file alone, with its
plots decoded, and nothing is fetched from the network.

Screenshots, one per pane: ``test-artifacts/browser/report-<trace>-<pane>.png`` (gitignored).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from browser.lab import CHROMIUM, chromium_browser
from planted import Planted

from hpcprof_kit.traces.reporting.report import PANES, report

from must_have import missing

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        missing(f"{CHROMIUM} not installed (.ci/run installs it)")
    with chromium_browser() as browser:
        yield browser


def _sources(shared: Path, tmp: Path) -> dict[str, Path]:
    return {
        "xpu": shared / "xpu" / "atpesc_xpu_eager_sample.json",
        "cuda": shared / "hta" / "cuda_1rank_ns_resolution.json.gz",
        "planted": Planted(slow={5: 1.6}, host_gap={2: 6000.0}, comm_us=8000.0).write(tmp / "p"),
    }


@pytest.mark.parametrize("trace", ["xpu", "cuda", "planted"])
def test_every_pane_of_the_html_report_opens_in_chromium(
    trace, browser, shared_traces, tmp_path, repo
):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = report(_sources(shared_traces, tmp_path)[trace])
    html = rep.write_html(tmp_path / f"{trace}.html")
    shots = repo / "test-artifacts" / "browser"
    shots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    fetched: list[str] = []
    page.on(
        "request",
        lambda r: fetched.append(r.url) if not r.url.startswith(("file:", "data:")) else None,
    )
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(html.as_uri())
        findings = page.locator(".finding, .none")
        assert findings.count() == max(1, len(rep.findings))
        for pane in PANES:
            page.click(f"nav button[data-pane='{pane}']")
            section = page.locator(f"#pane-{pane}")
            assert section.is_visible(), pane
            for other in PANES:
                if other != pane:
                    assert not page.locator(f"#pane-{other}").is_visible()
            # every plot decoded: an <img> with pixels, not a broken image
            sizes = section.locator("img").evaluate_all("els => els.map(e => e.naturalWidth)")
            assert all(w > 0 for w in sizes), (pane, sizes)
            tables = section.locator("table").count()
            assert tables == len(rep.panes[pane].tables), pane
            assert section.locator(".missing").count() == len(rep.panes[pane].missing)
            shot = shots / f"report-{trace}-{pane}.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if trace == "planted":
            page.click("nav button[data-pane='distributed']")
            assert page.locator("#pane-distributed img").count() == 2  # heatmap, spread
            assert "rank 5 works" in page.locator(".finding").first.inner_text()
    finally:
        page.close()
    assert errors == []
    assert fetched == [], f"the report fetched {fetched}: it must open offline"
