"""Viewing the results: a run's traces in Perfetto, its reports copied back, the Nsight GUIs.

Three things stand between a finished run and a learner looking at it:

- ``open_in_perfetto(run_dir)`` merges every rank into one file and shows a button that opens
  https://ui.perfetto.dev in a new tab and hands it the file (Perfetto's documented
  ``window.open`` + ``postMessage`` protocol), with the by-hand way beside it;
- ``copy_back_command(run_dir, "polaris")`` is the ``rsync`` line to type on the laptop, where
  the Nsight GUIs run, naming the reports this run wrote;
- ``nsight_gui_guide()`` is a table of where to click in those GUIs and what to look for,
  each row citing the guide it comes from.

>>> from hpcprof_kit.viewing import copy_back_command, nsight_gui_guide, open_in_perfetto
>>> open_in_perfetto("runs/train_local_N1_R2_20260101-120000")          # doctest: +SKIP
>>> print(copy_back_command("runs/train_polaris_N2_R4_20260101-120000", "polaris"))  # doctest: +SKIP
>>> nsight_gui_guide()["where_to_click"].iloc[0]
'File -> Open, pick the report'
"""

from __future__ import annotations

import base64
import getpass
import gzip
import html
import json
import os
import shlex
import uuid
from dataclasses import dataclass
from pathlib import Path

from hpcprof_kit.errors import SpecError
from hpcprof_kit.nsight.guide import nsight_gui_guide

__all__ = [
    "copy_back_command",
    "login_host",
    "nsight_gui_guide",
    "open_in_perfetto",
    "report_files",
]

PERFETTO_ORIGIN = "https://ui.perfetto.dev"
# The merged trace of a run sits at the top of its run directory, never in traces/ (where the
# loader would read it back as one more rank).
MERGED_NAME = "merged.json.gz"
# The button carries the trace inside the notebook output (base64, a third bigger), which the
# notebook stores and the page holds in memory; past this size, open the file by hand.
MAX_INLINE_MB = 16.0
# Above this, a plain .json is not even gzipped in memory to fit (Perfetto's own tab runs out
# of memory around 2 GB; gzipping hundreds of MB in the kernel would stall the notebook).
MAX_COMPRESS_MB = 256.0
_MB = 1024 * 1024

# What a run writes that is worth copying back, as globs under the run directory.
COPY_BACK_GLOBS = (
    "**/*.nsys-rep",  # Nsight Systems, one per traced rank
    "**/*.ncu-rep",  # Nsight Compute, one per traced rank
    "traces/unitrace/**/*",  # unitrace's chrome JSON per rank and its text summaries
    "merged*.json.gz",  # every rank in one file, for Perfetto
)
_SCRATCH_DIRS = ("tmp",)  # nsys's TMPDIR under traces/nsys/: scratch, not results


# ---- Perfetto ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PerfettoView:
    """A trace file with a button that opens it in ui.perfetto.dev, and the by-hand way.

    In a notebook it shows as the button (HTML); as text (``print``, ``repr``) it is the
    by-hand instructions. Nothing reaches the network until the button is clicked.
    """

    path: Path
    title: str
    size_bytes: int
    payload: bytes | None  # what the button hands to Perfetto; None when over the limit
    max_inline_mb: float = MAX_INLINE_MB

    @property
    def inlined(self) -> bool:
        """True when the button carries the trace (it is under ``max_inline_mb``)."""
        return self.payload is not None

    def by_hand(self) -> list[str]:
        """How to open the file without the button (offline, pop-up blocked, untrusted output)."""
        return [
            "1. on a cluster, copy the file to your laptop first: copy_back_command(run_dir, system)",
            f'2. open {PERFETTO_ORIGIN} -> "Open trace file" -> {self.path}',
            '   or, in Chrome without a network: chrome://tracing -> "Load" -> the same file',
        ]

    def text(self) -> str:
        """The plain-text view: what the file is, whether the button carries it, the by-hand way."""
        head = f"Perfetto: {self.path.name} - {self.title} ({_human_size(self.size_bytes)})"
        if self.inlined:
            button = (
                f"The button opens {PERFETTO_ORIGIN} in a new tab and hands it this file "
                "(nothing is sent before you click)."
            )
        else:
            button = (
                f"No button: the file is over the {self.max_inline_mb:g} MB a notebook output "
                "carries (it would be stored in the .ipynb and held by the page); open it by "
                "hand, or make it smaller (fewer active steps, fewer ranks)."
            )
        return "\n".join([head, button, "By hand:", *("  " + line for line in self.by_hand())])

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        uid = f"hpcprof-perfetto-{uuid.uuid4().hex[:12]}"
        fallback = f"<pre>{html.escape(self.text())}</pre>"
        if not self.inlined:
            return f'<div id="{uid}"><button type="button" disabled>Open in Perfetto</button>{fallback}</div>'
        label = html.escape(f"Open {self.path.name} in Perfetto")
        return (
            f'<div id="{uid}"><button type="button">{label}</button> '
            f'<span class="hpcprof-status"></span>{fallback}'
            f"<script>{_open_script(uid, self)}</script></div>"
        )


def _open_script(uid: str, view: PerfettoView) -> str:
    """The button's click handler: open the UI, PING until it answers PONG, post the trace.

    Protocol: perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui. The trace travels
    as base64 inside this script (no fetch, no external script), decoded only on click.
    """
    data = base64.b64encode(view.payload or b"").decode("ascii")
    return f"""(function () {{
  const ORIGIN = {_js(PERFETTO_ORIGIN)};
  const root = document.getElementById({_js(uid)});
  const status = root.querySelector(".hpcprof-status");
  const data = "{data}";
  const title = {_js(view.title)};
  const fileName = {_js(view.path.name)};
  function traceBuffer() {{
    const text = atob(data);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return bytes.buffer;
  }}
  root.querySelector("button").addEventListener("click", function () {{
    const ui = window.open(ORIGIN);
    if (!ui) {{
      status.textContent = "The browser blocked the new tab: allow pop-ups here, or open the file by hand (below).";
      return;
    }}
    status.textContent = "Waiting for Perfetto to load...";
    let pings = 0;
    function onMessage(event) {{
      if (event.source !== ui || event.origin !== ORIGIN || event.data !== "PONG") return;
      stop();
      ui.postMessage({{perfetto: {{buffer: traceBuffer(), title: title, fileName: fileName}}}}, ORIGIN);
      status.textContent = "Sent to Perfetto: see the new tab.";
    }}
    function stop() {{
      window.clearInterval(timer);
      window.removeEventListener("message", onMessage);
    }}
    const timer = window.setInterval(function () {{
      if (++pings > 300) {{
        stop();
        status.textContent = "Perfetto did not answer in 30 s (offline?): open the file by hand (below).";
        return;
      }}
      ui.postMessage("PING", ORIGIN);
    }}, 100);
    window.addEventListener("message", onMessage);
  }});
}})();"""


def _js(value: str) -> str:
    """A JavaScript string literal that cannot end the <script> element it sits in."""
    return json.dumps(value).replace("</", "<\\/")


def open_in_perfetto(
    path_or_run_dir: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str] | None = None,
    align: str = "steps",
    refresh: bool = False,
    max_inline_mb: float = MAX_INLINE_MB,
) -> PerfettoView:
    """A button that opens a run's merged trace (or one trace file) in ui.perfetto.dev.

    A run directory (or a folder of traces) is first merged, every rank into one file with a
    pid range per rank (``traces.merge_to_chrome``; ``align`` as there), written to
    ``<run_dir>/merged.json.gz`` (``merged-unitrace.json.gz`` for ``traces/unitrace``; or
    ``out``) and reused while it is newer than the traces
    (``refresh=True`` merges again). A file (a trace, or a merged one) opens as it is.

    The button carries the file inside the notebook output up to ``max_inline_mb`` (a plain
    ``.json`` is gzipped in memory first: Perfetto reads gzip); a bigger file gets no button,
    only the by-hand instructions, which are always shown.

    >>> view = open_in_perfetto("runs/train_local_N1_R2_20260101-120000")  # doctest: +SKIP
    >>> view.path.name, view.inlined                                     # doctest: +SKIP
    ('merged.json.gz', True)
    """
    source = Path(path_or_run_dir).resolve()
    if source.is_dir():
        path = _merged(source, out, align, refresh)
        run = _run_dir_of(source) or source
        title = f"all ranks of {run.name}"
    elif source.is_file():
        path, title = source, "one trace file"
    else:
        raise SpecError(
            f"{source} does not exist: pass a run directory, a folder of traces, or a trace file"
        )
    size = path.stat().st_size
    return PerfettoView(
        path=path.resolve(),
        title=title,
        size_bytes=size,
        payload=_payload(path, size, max_inline_mb),
        max_inline_mb=max_inline_mb,
    )


def _run_dir_of(folder: Path) -> Path | None:
    """The run directory holding ``folder`` (itself, or up to three levels above), if any."""
    from hpcprof_kit.traces.table.loader import RUN_DIR_MARKERS

    for candidate in (folder, *list(folder.parents)[:3]):
        if any((candidate / m).is_file() for m in RUN_DIR_MARKERS):
            return candidate
    return None


def _merged_path(folder: Path) -> Path:
    """Where the merge of ``folder`` goes: never inside a folder the loader reads as traces."""
    run = _run_dir_of(folder)
    if run is None:
        return folder.parent / f"{folder.name}-{MERGED_NAME}"
    if folder in (run, run / "traces"):
        return run / MERGED_NAME
    return run / f"merged-{folder.name}.json.gz"  # e.g. traces/unitrace


def _merged(folder: Path, out: str | os.PathLike[str] | None, align: str, refresh: bool) -> Path:
    from hpcprof_kit.errors import TraceFormatError
    from hpcprof_kit.traces import merge_to_chrome
    from hpcprof_kit.traces.table.loader import find_trace_files

    target = Path(out) if out is not None else _merged_path(folder)
    try:
        inputs = find_trace_files(folder)
    except TraceFormatError as exc:
        raise TraceFormatError(
            f"{exc}. Perfetto opens chrome JSON traces: for unitrace pass RUN_DIR/traces/unitrace; "
            "nsys/ncu reports open in the Nsight GUIs (copy_back_command, nsight_gui_guide)"
        ) from None
    newest = max(f.stat().st_mtime_ns for f in inputs)
    if refresh or not target.is_file() or target.stat().st_mtime_ns < newest:
        merge_to_chrome(folder, target, align=align)
    return target


def _payload(path: Path, size: int, max_inline_mb: float) -> bytes | None:
    """The bytes the button hands over (gzip of a plain .json when that fits), or None."""
    limit = max_inline_mb * _MB
    if size <= limit:
        return path.read_bytes()
    if path.name.endswith(".gz") or size > MAX_COMPRESS_MB * _MB:
        return None
    packed = gzip.compress(path.read_bytes(), compresslevel=6)
    return packed if len(packed) <= limit else None


def _human_size(size: int) -> str:
    # coarse on purpose: small traces vary by bytes from run to run, the text should not
    return "under 1 MB" if size < _MB else f"{size / _MB:.1f} MB"


# ---- copying reports back to the laptop -------------------------------------------------------


def report_files(run_dir: str | os.PathLike[str]) -> list[Path]:
    """The files of a run worth copying back (``COPY_BACK_GLOBS``), relative to the run dir.

    >>> report_files("runs/train_polaris_N2_R4_20260101-120000")   # doctest: +SKIP
    [PosixPath('traces/nsys/train_polaris_N2_R4_20260101-120000_0.nsys-rep'), ...]
    """
    root = Path(run_dir)
    found = {
        p.relative_to(root)
        for pattern in COPY_BACK_GLOBS
        for p in root.glob(pattern)
        if p.is_file()
    }
    return sorted(f for f in found if not set(f.parts[:-1]) & set(_SCRATCH_DIRS))


def login_host(system: str, host: str | None = None) -> str:
    """Where to copy from: ``host``, then ``$HPCPROF_LOGIN_HOST``, then the system record's
    ``login_host``.

    >>> login_host("polaris")
    'polaris.alcf.anl.gov'
    """
    from hpcprof_kit.systems import load_system

    record = load_system(system)
    found = host or os.environ.get("HPCPROF_LOGIN_HOST") or record.extra.get("login_host")
    if not found:
        raise SpecError(
            f"system {system!r} names no login host to copy from; pass host='login.example.org' "
            "(a 'local' run is already on this machine: open its files where they are)"
        )
    return str(found)


def copy_back_command(
    run_dir: str | os.PathLike[str],
    system: str,
    *,
    user: str | None = None,
    host: str | None = None,
    dest: str | None = None,
    tool: str = "rsync",
) -> str:
    """The command to type on your laptop to copy this run's reports from the system.

    Names exactly the reports the run wrote (``report_files``: ``.nsys-rep``, ``.ncu-rep``,
    unitrace output, the merged trace), each quoted for the shell, from
    ``user@login_host(system)`` into ``dest`` (default ``./<run name>/``). ``user`` defaults to
    your login name here (the notebook runs on the system, so it is your name there).
    ``tool="scp"`` gives the same copy with scp.

    >>> print(copy_back_command("runs/train_polaris_N2_R4_20260101-120000", "polaris",
    ...                         user="me"))                               # doctest: +SKIP
    rsync -av --partial \\
      me@polaris.alcf.anl.gov:/lus/eagle/.../traces/nsys/train_..._0.nsys-rep \\
      ./train_polaris_N2_R4_20260101-120000/
    """
    if tool not in ("rsync", "scp"):
        raise SpecError(f"tool={tool!r}: pass 'rsync' (resumes a cut transfer) or 'scp'")
    root = Path(run_dir).resolve()
    files = report_files(root)
    if not files:
        raise SpecError(
            f"{root} holds no report to copy back (looked for {', '.join(COPY_BACK_GLOBS)}); "
            "has the job finished, with a tracer or profiling on? "
            "open_in_perfetto(run_dir) writes the merged trace"
        )
    remote = f"{user or getpass.getuser()}@{login_host(system, host)}"
    target = dest or f"./{root.name}/"
    sources = [shlex.quote(f"{remote}:{root / f}") for f in files]
    if tool == "rsync":
        head = ["rsync -av --partial"]
    else:  # scp does not create the destination folder
        head = [f"mkdir -p {shlex.quote(target)} && scp"]
    return " \\\n  ".join([*head, *sources, shlex.quote(target)])
