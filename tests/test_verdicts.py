"""The report held to the checked-in table of verdicts (``tests/fixtures/verdicts.json``):
on every shared third-party trace and every real H100 recording of the pathologies app, the
findings are exactly those the table lists (kind, ranks, steps), each read against the raw
trace and given a verdict with one line of evidence. A finding that appears, disappears or
changes its ranks or steps fails here until the table is read again. ``docs/verdicts.md`` is
the table as markdown: ``python tests/test_verdicts.py`` writes it.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import pytest

from must_have import missing

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO / "tests" / "fixtures" / "verdicts.json"
DOC = REPO / "docs" / "verdicts.md"
ROOTS = {
    "shared": REPO.parent / "shared" / "traces",
    "fixture": REPO / "tests" / "fixtures" / "traces",
}
VERDICTS = ("true", "debatable", "false")


def entries() -> list[dict]:
    return json.loads(TABLE.read_text())["inputs"]


def paths(spec: str | list[str]) -> list[Path]:
    return [
        ROOTS[s.split("/", 1)[0]] / s.split("/", 1)[1]
        for s in ([spec] if isinstance(spec, str) else spec)
    ]


def label(spec: str | list[str]) -> str:
    return spec if isinstance(spec, str) else " + ".join(spec)


@pytest.mark.parametrize("entry", entries(), ids=lambda e: label(e["input"]))
def test_the_report_makes_the_findings_the_table_reads(entry):
    from hpcprof_kit import traces
    from hpcprof_kit.traces.reporting.report import report

    where = paths(entry["input"])
    if not all(p.exists() for p in where):
        missing(f"{label(entry['input'])} is not here (../shared/traces is absent)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.load(where if len(where) > 1 else where[0], cache=False)
        found = report(df).findings
    coverage = dict(getattr(found, "coverage", {}))  # rule -> why it did not run
    seen = sorted((f["kind"], f["ranks"], f["steps"]) for f in found)
    listed = sorted((f["kind"], f["ranks"], f["steps"]) for f in entry["findings"])
    assert seen == listed
    # a rule the table says the report sets aside says why, and makes no finding
    for aside in entry.get("set_aside", []):
        assert coverage.get(aside["kind"], "").startswith("not judged: "), aside["kind"]


def test_every_finding_has_a_verdict_and_a_line_of_evidence():
    for entry in entries():
        for f in entry["findings"]:
            assert f["verdict"] in VERDICTS, (entry["input"], f["kind"])
            assert len(f["evidence"]) > 40 and "\n" not in f["evidence"], (entry["input"], f)


def test_no_finding_is_false_or_debatable():
    doubted = [(label(e["input"]), f["kind"], f["verdict"]) for e in entries()
               for f in e["findings"] if f["verdict"] != "true"]  # fmt: skip
    assert doubted == []


def render() -> str:
    """docs/verdicts.md: the table as markdown, with its counts."""
    rows, counts = [], dict.fromkeys(VERDICTS, 0)
    for entry in entries():
        if not entry["findings"]:
            rows.append(f"| `{label(entry['input'])}` | (none) | | | no finding |")
        for aside in entry.get("set_aside", []):
            rows.append(f"| `{label(entry['input'])}` | `{aside['kind']}` | | set aside "
                        f"(not judged) | {aside['evidence']} |")  # fmt: skip
        for f in entry["findings"]:
            counts[f["verdict"]] += 1
            steps = ", ".join(map(str, f["steps"])) or "-"
            rows.append(f"| `{label(entry['input'])}` | `{f['kind']}` | {f['ranks']} / {steps} "
                        f"| **{f['verdict']}** | {f['evidence']} |")  # fmt: skip
    total = sum(counts.values())
    head = [
        "# Verdicts on real traces",
        "",
        "Every finding the report makes on the shared third-party traces (`../shared/traces`: each",
        "file, and ranks 0 and 1 of the 128-rank job loaded together) and on the real H100",
        "recordings of `tests/fixtures/traces/gpu_pathologies`, read against the raw trace.",
        "Written from `tests/fixtures/verdicts.json` by `python tests/test_verdicts.py`;",
        "`tests/test_verdicts.py` holds the report to it.",
        "",
        f"{total} findings: {counts['true']} true, {counts['debatable']} debatable, "
        f"{counts['false']} false. A rule the report sets aside, saying why (a trace that lost "
        "its events), is listed as set aside.",
        "",
        "| input | finding | ranks / steps | verdict | evidence from the raw trace |",
        "|---|---|---|---|---|",
    ]
    return "\n".join(head + rows) + "\n"


def test_the_markdown_table_is_the_data_files():
    assert DOC.read_text() == render()


if __name__ == "__main__":
    DOC.write_text(render())
    sys.stdout.write(f"wrote {DOC}\n")
