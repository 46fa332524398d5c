"""A report in JupyterLab: the findings on top, then one tab per pane (ipywidgets)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from hpcprof_kit.traces.run_report import Report


def report_tabs(rep: Report):
    """An ``ipywidgets.VBox``: the findings, then a ``Tab`` with a child per pane (its plots
    and tables, drawn when the report is shown)."""
    import ipywidgets as w

    from hpcprof_kit.traces.report_html import STYLE, findings_html, pane_html

    style = f"<style>{STYLE.replace('body {', '.hpk-report {')}</style>"
    children = [
        w.HTML(f"{style}<div class='hpk-report'>{pane_html(rep, name)}</div>") for name in rep.panes
    ]
    tabs = w.Tab(children=children)
    for i, name in enumerate(rep.panes):
        tabs.set_title(i, rep.panes[name].title)
    top = w.HTML(f"{style}<div class='hpk-report'>{findings_html(rep.findings, rep.run)}</div>")
    return w.VBox([top, tabs])
