"""A report in JupyterLab: the findings on top, then one tab per pane (ipywidgets)."""

from __future__ import annotations

from typing import Any

LATER = "<p><i>This pane is drawn when you open its tab.</i></p>"


def report_tabs(rep: Any):
    """An ``ipywidgets.VBox``: the time lost (its picture too) and the findings, then a
    ``Tab`` with a child per pane. The first
    pane is drawn now; each other pane's plots and tables when its tab is first opened, so
    showing a report costs one pane's plots."""
    import ipywidgets as w

    from hpcprof_kit.traces.reporting.html import STYLE, findings_html, pane_html, time_lost_html

    style = f"<style>{STYLE.replace('body {', '.hpk-report {')}</style>"
    names = list(rep.panes)

    def drawn(name: str) -> str:
        return f"{style}<div class='hpk-report'>{pane_html(rep, name)}</div>"

    children = [w.HTML(drawn(names[0]) if i == 0 else LATER) for i in range(len(names))]
    tabs = w.Tab(children=children)
    for i, name in enumerate(names):
        tabs.set_title(i, rep.panes[name].title)

    def on_select(change) -> None:
        i = change["new"]
        if i is not None and children[i].value == LATER:
            children[i].value = drawn(names[i])

    tabs.observe(on_select, names="selected_index")
    lost = time_lost_html(getattr(rep, "time_lost", None))
    top = w.HTML(f"{style}<div class='hpk-report'>{lost}{findings_html(rep.findings, rep.run)}"
                 "</div>")  # fmt: skip
    box = w.VBox([top, tabs])
    box.tabs = tabs  # for a test or a script: select a tab to draw its pane
    return box
