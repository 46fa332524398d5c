"""Viewing the results: the Perfetto button, the copy-back line, the Nsight GUI table."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcprof_kit.errors import SpecError, TraceFormatError
from hpcprof_kit.nsight.guide import guides
from hpcprof_kit.viewing import (
    MERGED_NAME,
    PERFETTO_ORIGIN,
    copy_back_command,
    nsight_gui_guide,
    open_in_perfetto,
)

from must_have import missing

FIXTURE = Path(__file__).parent / "fixtures" / "traces" / "ddp_cpu_2rank"
SEEDS = Path(os.environ.get("HPCPROF_SEEDS_DIR", Path(__file__).parents[2] / "shared" / "seeds"))


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A finished CPU run of 2 ranks, laid out as the kit lays it out."""
    run = tmp_path / "train_local_N1_R2_20260101-120000"
    shutil.copytree(FIXTURE, run / "traces")
    (run / "manifest.json").write_text('{"state": "COMPLETED"}')
    return run


def _embedded(page: str) -> bytes:
    return base64.b64decode(re.search(r'const data = "([A-Za-z0-9+/=]*)"', page).group(1))


def _args(command: str, program: str) -> list[str]:
    """The arguments bash hands ``program`` when it runs ``command`` (program stubbed out)."""
    stub = f'{program}() {{ printf "%s\\n" "$@"; }}; mkdir() {{ :; }}; {command}'
    done = subprocess.run(["bash", "-c", stub], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


# ---- Perfetto --------------------------------------------------------------------------------


def test_the_button_fetches_nothing_at_render_and_opens_only_perfetto(run_dir):
    page = open_in_perfetto(run_dir)._repr_html_()
    assert not re.search(r"<(script|img|iframe|link)\b[^>]*\b(src|href)=", page, re.IGNORECASE)
    assert "fetch(" not in page and "XMLHttpRequest" not in page and "import(" not in page
    assert set(re.findall(r"https?://[\w.-]+", page)) == {PERFETTO_ORIGIN}
    assert "window.open(ORIGIN)" in page
    assert '"PING"' in page and '"PONG"' in page  # the documented handshake
    assert "perfetto: {buffer:" in page


def test_the_button_carries_the_merged_trace_of_every_rank(run_dir):
    view = open_in_perfetto(run_dir)
    assert view.path == (run_dir / MERGED_NAME).resolve() and view.inlined
    carried = _embedded(view._repr_html_())
    assert carried == (run_dir / MERGED_NAME).read_bytes()
    events = json.loads(gzip.decompress(carried))["traceEvents"]
    assert {e["args"]["rank"] for e in events if e["ph"] == "X"} == {0, 1}
    assert not list((run_dir / "traces").glob("merged*"))  # never where the loader reads


def test_the_merged_trace_is_reused_until_a_trace_changes(run_dir):
    merged = open_in_perfetto(run_dir).path
    later, latest = 4 * 10**18, 5 * 10**18  # years 2096 and 2128: after anything written now
    os.utime(merged, ns=(later, later))
    open_in_perfetto(run_dir)
    assert merged.stat().st_mtime_ns == later
    os.utime(run_dir / "traces" / "trace-1-of-2.json.gz", ns=(latest, latest))
    open_in_perfetto(run_dir)
    assert merged.stat().st_mtime_ns != later


def test_a_50_mb_trace_gets_no_button_but_the_way_by_hand(tmp_path):
    big = tmp_path / "big.json.gz"
    with open(big, "wb") as fh:
        fh.truncate(50 * 1024 * 1024)
    view = open_in_perfetto(big)
    page = view._repr_html_()
    assert not view.inlined and len(page) < 10_000
    assert "disabled" in page and "const data" not in page
    assert "over the 16 MB" in view.text()
    assert str(big) in view.text() and "50.0 MB" in view.text()


def test_a_plain_json_over_the_limit_is_gzipped_to_fit(tmp_path):
    trace = tmp_path / "one.json"
    trace.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "x" * 50}] * 40_000}))
    view = open_in_perfetto(trace, max_inline_mb=0.5)
    assert trace.stat().st_size > 0.5 * 1024 * 1024 and view.inlined
    assert gzip.decompress(_embedded(view._repr_html_())) == trace.read_bytes()


def test_the_text_names_the_file_and_reads_the_same_every_run(run_dir):
    view = open_in_perfetto(run_dir)
    text = repr(view)
    assert str(run_dir / MERGED_NAME) in text
    assert '"Open trace file"' in text and "chrome://tracing" in text
    assert "under 1 MB" in text  # coarse: a few bytes more or less do not change the text
    assert text.replace(str(run_dir), "RUN") == repr(open_in_perfetto(run_dir)).replace(
        str(run_dir), "RUN"
    )


def test_a_unitrace_folder_merges_beside_the_run_not_into_its_traces(run_dir):
    unitrace = run_dir / "traces" / "unitrace"
    unitrace.mkdir()
    shutil.copy(FIXTURE.parent / "myapp.4321.1.json", unitrace)
    view = open_in_perfetto(unitrace)
    assert view.path == (run_dir / "merged-unitrace.json.gz").resolve()
    assert view.title == f"all ranks of {run_dir.name}"
    assert sorted(p.name for p in (run_dir / "traces").iterdir() if p.is_file()) == [
        "trace-0-of-2.json.gz",
        "trace-1-of-2.json.gz",
    ]


def test_a_run_without_chrome_traces_points_to_the_right_viewer(nsys_run):
    (nsys_run / "manifest.json").write_text("{}")
    shutil.rmtree(nsys_run / "traces")
    (nsys_run / "traces").mkdir()
    with pytest.raises(TraceFormatError, match="Nsight GUIs"):
        open_in_perfetto(nsys_run)


def test_a_path_that_does_not_exist_says_what_to_pass(tmp_path):
    with pytest.raises(SpecError, match="run directory, a folder of traces, or a trace file"):
        open_in_perfetto(tmp_path / "nope")


# ---- copying back ----------------------------------------------------------------------------


@pytest.fixture
def nsys_run(tmp_path: Path) -> Path:
    run = tmp_path / "train_polaris_N2_R4_20260101-120000"
    reports = run / "traces" / "nsys"
    (reports / "tmp").mkdir(parents=True)
    for name in ("rep_0.nsys-rep", "rep_1.nsys-rep", "tmp/nsys-scratch.nsys-rep"):
        (reports / name).write_bytes(b"report")
    (run / "stdout").write_text("kernel summary")
    (run / "traces" / "trace-0-of-8.json").write_text("{}")
    return run


def test_the_copy_back_line_names_exactly_the_reports_and_parses(nsys_run):
    command = copy_back_command(nsys_run, "polaris", user="me")
    assert subprocess.run(["bash", "-n"], input=command, text=True).returncode == 0
    remote = "me@polaris.alcf.anl.gov:"
    assert _args(command, "rsync") == [
        "-av",
        "--partial",
        f"{remote}{nsys_run.resolve()}/traces/nsys/rep_0.nsys-rep",
        f"{remote}{nsys_run.resolve()}/traces/nsys/rep_1.nsys-rep",
        "./train_polaris_N2_R4_20260101-120000/",
    ]


def test_paths_with_spaces_stay_one_argument_and_scp_makes_the_folder(tmp_path):
    run = tmp_path / "my runs" / "seqpar_aurora_N1_R12_20260101-120000"
    (run / "traces" / "unitrace").mkdir(parents=True)
    (run / "traces" / "unitrace" / "python.4321.0.json").write_text("{}")
    command = copy_back_command(run, "aurora", user="me", tool="scp", dest="~/traces dir")
    assert subprocess.run(["bash", "-n"], input=command, text=True).returncode == 0
    assert command.startswith("mkdir -p '~/traces dir' && scp")
    assert _args(command, "scp") == [
        f"me@aurora.alcf.anl.gov:{run.resolve()}/traces/unitrace/python.4321.0.json",
        "~/traces dir",
    ]


def test_the_login_host_comes_from_the_argument_then_the_environment(nsys_run, monkeypatch):
    assert "me@login.example.org:" in copy_back_command(
        nsys_run, "polaris", user="me", host="login.example.org"
    )
    monkeypatch.setenv("HPCPROF_LOGIN_HOST", "edge.example.org")
    assert "me@edge.example.org:" in copy_back_command(nsys_run, "polaris", user="me")


def test_a_local_run_or_an_empty_run_says_what_to_do(nsys_run, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match="host="):
        copy_back_command(nsys_run, "local")
    with pytest.raises(SpecError, match="holds no report"):
        copy_back_command((tmp_path / "empty").resolve(), "polaris")


# ---- the Nsight GUI table --------------------------------------------------------------------


def test_the_gui_table_teaches_the_views_the_guides_show():
    guide = nsight_gui_guide()
    clicks = " | ".join(guide["where_to_click"])
    for view in ("CUDA HW", "NCCL", "multi-report view", "Speed of Light", "roofline"):
        assert view in clicks


# The guides' texts as the project keeps them, by the public address the kit cites.
GUIDE_TEXTS = {
    "https://docs.alcf.anl.gov/polaris/data-science/profiling_dl/": "001_b4e57ae57f0acb4c.txt",
    "https://github.com/argonne-lcf/ALCF_Hands_on_HPC_Workshop (ai_ml_profiling)": "004_8af14c9cdc3c3bc6.txt",
}


def test_every_row_cites_a_guide_by_address_and_a_heading_in_it():
    if not SEEDS.is_dir():
        missing(f"the guides' texts are not at {SEEDS} (set HPCPROF_SEEDS_DIR)")
    assert set(guides()) == set(GUIDE_TEXTS)
    for row in nsight_gui_guide().itertuples():
        assert row.guide in guides(), f"{row.report}: cites {row.guide}, not in [guides]"
        seed = SEEDS / GUIDE_TEXTS[row.guide]
        assert seed.is_file(), f"{row.report}: the text of {row.guide} is not in {SEEDS}"
        headings = [
            line.lstrip("#").strip().replace("`", "")
            for line in seed.read_text().splitlines()
            if line.startswith("#")
        ]
        at = 0
        for part in row.section.split(" > "):  # heading, then a subheading under it
            assert part in headings[at:], f"{row.guide} has no heading {part!r} ({row.section})"
            at = headings.index(part, at) + 1


# ---- the button in a real browser ------------------------------------------------------------

FAKE_PERFETTO = """<html><body><script>
window.addEventListener("message", (e) => {
  if (e.data === "PING") { e.source.postMessage("PONG", "*"); return; }
  const t = e.data.perfetto;
  document.title = "got " + t.buffer.byteLength + " " + t.title + " " + t.fileName;
  window.received = Array.from(new Uint8Array(t.buffer));
});
</script></body></html>"""


@pytest.mark.browser
def test_clicking_the_button_in_jupyterlab_hands_the_trace_to_perfetto(run_dir, tmp_path):
    """In JupyterLab (which runs an output's script only when the output is trusted), the
    rendered button fetches nothing, and a click hands the merged file to a stand-in
    ui.perfetto.dev through the PING/PONG handshake."""
    try:
        import nbformat
        from browser.lab import CHROMIUM, CHROMIUM_ARGS, JupyterLab
        from browser.page import open_notebook, run_all, wait_until_ran
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        missing(f"the browser tests' tools are not installed ({exc})")
    if not Path(CHROMIUM).exists():
        missing(f"{CHROMIUM} not installed")
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    notebook.cells = [
        nbformat.v4.new_code_cell(
            f"from hpcprof_kit.viewing import open_in_perfetto\nopen_in_perfetto({run_dir.name!r})"
        )
    ]
    nbformat.write(notebook, run_dir.parent / "view.ipynb")
    with JupyterLab(tmp_path / "lab", run_dir.parent) as lab, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page, blocked = open_notebook(browser, lab, "view.ipynb")
            page.context.route(
                f"{PERFETTO_ORIGIN}/**",
                lambda route: route.fulfill(body=FAKE_PERFETTO, content_type="text/html"),
            )
            run_all(page)
            assert wait_until_ran(page, "view.ipynb", 120)["errors"] == []
            assert blocked == []  # rendering the button asked nothing of the network
            with page.context.expect_page() as opened:
                page.click("button:has-text('in Perfetto')")
            ui = opened.value
            ui.wait_for_function("document.title.startsWith('got ')", timeout=30_000)
            merged = (run_dir / MERGED_NAME).read_bytes()
            title = f"all ranks of {run_dir.name}"
            assert ui.title() == f"got {len(merged)} {title} {MERGED_NAME}"
            assert bytes(ui.evaluate("window.received")) == merged
            assert "Sent to Perfetto" in page.inner_text(".hpcprof-status")
        finally:
            browser.close()
