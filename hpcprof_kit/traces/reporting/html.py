"""A report as one HTML file: the findings, then a tab per pane with its tables and plots.

Everything is inline (style, the few lines of script that switch tabs, the plots as PNG data
URLs), so the file opens offline in any browser and can be handed out as it is.
"""

from __future__ import annotations

import base64
import html
import io
from numbers import Number
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcprof_kit.errors import SpecError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

MAX_ROWS = 60  # rows of a table shown in the page (the JSON has them all)
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.2em; } h3 { font-size: 1em; }
.finding { border-left: 4px solid #c44e52; padding: 0.3em 0.8em; margin: 0.5em 0;
           background: #fbf3f3; }
.finding .kind { font-weight: bold; font-family: monospace; }
.finding table.evidence th { text-align: left; font-weight: normal; color: #555; }
.none { border-left: 4px solid #55a868; padding: 0.3em 0.8em; background: #f2f8f3; }
nav button { font-size: 1em; padding: 0.4em 1em; border: 1px solid #999; background: #eee;
             cursor: pointer; }
nav button.active { background: #fff; border-bottom: 2px solid #4c72b0; font-weight: bold; }
section.pane { display: none; border-top: 1px solid #999; padding-top: 0.5em; }
section.pane.active { display: block; }
table { border-collapse: collapse; font-size: 0.8em; margin: 0.4em 0; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
th { background: #f4f4f4; }
.missing { color: #8a6d3b; } .note { color: #555; }
.lost { border-left: 4px solid #4c72b0; padding: 0.3em 0.8em; background: #f3f6fb; }
img { max-width: 100%; }
"""
SCRIPT = """
function showPane(name) {
  document.querySelectorAll('section.pane').forEach(s => s.classList.toggle('active', s.id === 'pane-' + name));
  document.querySelectorAll('nav button').forEach(b => b.classList.toggle('active', b.dataset.pane === name));
}
"""


def _e(text: Any) -> str:
    return html.escape(str(text))


def findings_html(findings: list[dict], run: dict) -> str:
    """The findings as HTML blocks (also the report's notebook display)."""
    ranks = run.get("ranks", [])
    head = (
        f"<p>{len(ranks)} rank(s) traced of world size {_e(run.get('world_size') or '?')}, "
        f"{_e(run.get('kind'))} trace, steps {_e(run.get('steps'))}, {run.get('events', 0):,} events</p>"
    )
    not_run = getattr(findings, "coverage", {})  # rules that could not run here, and why
    parts = [head]
    if not findings:
        ran = "that ran " if not_run else ""
        parts.append(f'<div class="none">No finding: none of the rules {ran}triggered.</div>')
    if not_run:
        rows = "".join(f"<li><b>{_e(kind)}</b>: {_e(why)}</li>" for kind, why in not_run.items())
        parts.append(f'<div class="missing">Rules not run on this trace:<ul>{rows}</ul></div>')
    for f in findings:
        parts.append(
            '<div class="finding">'
            f'<span class="kind">{_e(f["kind"])}</span> on ranks {_e(f["ranks"])}: '
            f"{_e(f['summary'])}<br>value {_e(f['value'])} {_e(f['unit'])} "
            f"(threshold {_e(f['threshold'])})"
            + (
                f", lost {f['lost_ms']:.1f} ms of the run" if f.get("lost_ms") is not None else ""
            )  # fmt: skip
            + f"<br><b>Try:</b> {_e(f['advice'])}"
            f"{evidence_html(f['evidence'])}</div>"
        )
    return "".join(parts)


def time_lost_html(acc: Any, figure: bool = True) -> str:
    """The "Time lost" block: the account in words, its rank x step picture and its steps'
    table (the JSON has the cells)."""
    if acc is None:
        return ""
    lines = acc.text().strip().splitlines()
    out = [f'<div class="lost"><b>{_e(lines[0])}</b>']
    if len(lines) > 1:
        out.append("<ul>" + "".join(f"<li>{_e(x.strip())}</li>" for x in lines[1:]) + "</ul>")
    out.append("</div>")
    if figure:  # drawn whenever there is an account, a clean run's as well (all 0)
        from hpcprof_kit.traces.plots.time_lost import plot_time_lost

        plot = plot_time_lost(acc)
        if plot is not None:
            out.append(figure_html(plot))
    if acc.steps is not None and len(acc.steps):
        out.append(table_html(acc.steps.round(3)))
    return "".join(out)


NAME_CHARS = 90  # a kernel's name is cut here in an evidence table (the JSON has it whole)


def _label(key: Any) -> tuple[str, float, str]:
    """An evidence key -> (label, factor to its shown unit, unit): ``cost_ms_per_step`` ->
    ('cost per step', 1, 'ms'); ``rank_median_us`` -> ('rank median', 0.001, 'ms')."""
    words = str(key).split("_")
    for unit, factor, shown in (("ms", 1.0, "ms"), ("us", 1e-3, "ms"), ("ns", 1e-6, "ms"),
                                ("pct", 1.0, "%")):  # fmt: skip
        if unit in words:
            words.remove(unit)
            return " ".join(words), factor, shown
    return " ".join(words), 1.0, ""


def _value(value: Any, factor: float = 1.0) -> str:
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, Number):
        v = float(value) * factor
        if v.is_integer() and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:,.3f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:,.1f}"
    text = str(value)
    return text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 3] + "..."


def _rows_table(rows: list[dict]) -> str:
    """A list of events (dicts) as a small table, times in ms."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    labels = [_label(c) for c in cols]
    head = "".join(f"<th>{_e(lab)}{f' ({u})' if u else ''}</th>" for lab, _, u in labels)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{_e(_value(r.get(c), f))}</td>"
            for c, (_, f, _u) in zip(cols, labels, strict=True)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def evidence_html(evidence: Any) -> str:
    """A finding's evidence as a short table: each number with its unit (times in ms), the
    events it names as rows of their own, per-rank values in one row.

    >>> print(evidence_html({"cost_ms_per_step": 12.0171, "slower": [
    ...     {"name": "gemm", "rank_median_us": 3204.318, "ratio": 1.599}]}))  # doctest: +ELLIPSIS
    <table class="evidence"><tr><th>cost per step</th><td>12.017 ms</td></tr><tr><th>slower</th><td><table><tr><th>name</th><th>rank median (ms)</th><th>ratio</th></tr><tr><td>gemm</td><td>3.204</td><td>1.599</td></tr></table></td></tr></table>
    """
    if not isinstance(evidence, dict):
        return f"<p>{_e(_value(evidence))}</p>"
    rows = []
    for key, value in evidence.items():
        label, factor, unit = _label(key)
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            cell = _rows_table(value)
        elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            cell = _rows_table([{"name": k, **v} for k, v in value.items()])
        elif isinstance(value, dict):  # per rank or per step: one row, keys as headers
            by = "rank " if label.endswith("by rank") else "step " if "per step" in label else ""
            shown = {f"{by}{k}": v * factor if _num(v) else v for k, v in value.items()}
            cell = _rows_table([shown]) + (f" {_e(unit)}" if unit else "")
        elif isinstance(value, list):
            cell = _e(", ".join(_value(v, factor) for v in value)) + (
                f" {_e(unit)}" if unit else ""
            )
        else:
            cell = _e(_value(value, factor)) + (f" {_e(unit)}" if unit else "")
        rows.append(f"<tr><th>{_e(label)}</th><td>{cell}</td></tr>")
    return f'<table class="evidence">{"".join(rows)}</table>'


def _num(v: Any) -> bool:
    return isinstance(v, Number) and not isinstance(v, bool)


def table_html(table: pd.DataFrame) -> str:
    shown = table.head(MAX_ROWS)
    more = len(table) - len(shown)
    body = shown.to_html(index=table.index.name is not None, float_format=lambda v: f"{v:.3f}")
    if more > 0:
        body += f'<p class="note">... {more} more rows in the JSON report</p>'
    return body


def figure_html(plot) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    plot.fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(plot.fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="plot" src="data:image/png;base64,{data}">'


def pane_html(rep: Any, name: str, figures: bool = True) -> str:
    pane = rep.panes[name]
    parts = []
    if figures:
        for fig_name, plot in rep.figures(name).items():
            parts.append(f"<h3>{_e(fig_name)}</h3>{figure_html(plot)}")
    for table_name, table in pane.tables.items():
        parts.append(f"<h3>{_e(table_name)}</h3>{table_html(table)}")
    for note in pane.notes:
        parts.append(f'<p class="note">{_e(note)}</p>')
    for what, why in pane.missing.items():
        parts.append(f'<p class="missing">Not shown: <b>{_e(what)}</b>: {_e(why)}</p>')
    return "".join(parts)


def page(rep: Any) -> str:
    """The whole report as one HTML document."""
    import matplotlib

    matplotlib.use("Agg")
    names = list(rep.panes)
    nav = "".join(
        f'<button data-pane="{n}" onclick="showPane(\'{n}\')"'
        f"{' class=active' if i == 0 else ''}>{_e(rep.panes[n].title)}</button>"
        for i, n in enumerate(names)
    )
    sections = "".join(
        f'<section class="pane{" active" if i == 0 else ""}" id="pane-{n}">'
        f"<h2>{_e(rep.panes[n].title)}</h2>{pane_html(rep, n)}</section>"
        for i, n in enumerate(names)
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>hpcprof-kit report</title>"
        f"<style>{STYLE}</style><script>{SCRIPT}</script></head><body>"
        f"<h1>Profile report</h1><h2>Time lost</h2>{time_lost_html(rep.time_lost)}"
        f"<h2>Findings</h2>{findings_html(rep.findings, rep.run)}"
        f"<nav>{nav}</nav>{sections}</body></html>"
    )


def write_html(rep: Any, path: Path, *, force: bool = False) -> Path:
    """Write :func:`page` to ``path``; an existing file is kept unless ``force``."""
    if path.exists() and not force:
        raise SpecError(
            f"{path} exists and is kept; pass force=True (--force) to replace it, or name "
            "another file"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    text = page(rep)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
