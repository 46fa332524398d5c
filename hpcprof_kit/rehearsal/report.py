"""What a rehearsal reports: one ``Stage`` per step, the ``Rehearsal`` that holds them, and why
ranks die (``RANK_FAILURES``, as data), every line marked as a stand-in's.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

PREFIX = "[rehearsal stand-in]"
REPORT = "rehearsal.json"


@dataclass(frozen=True)
class Stage:
    name: str
    status: str  # "ok" | "fail" | "skip"
    detail: str
    fix: str = ""

    def line(self) -> str:
        tag = {"ok": "OK  ", "fail": "FAIL", "skip": "SKIP"}[self.status]
        text = f"{PREFIX} {self.name:<8} {tag} {self.detail}"
        return f"{text} -> fix: {self.fix}" if self.fix else text


@dataclass
class Rehearsal:
    """The outcome: one Stage per step, the run directory, and what the twin mapped."""

    system: str
    mode: str
    stages: list[Stage] = field(default_factory=list)
    run_dir: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.status == "ok" for s in self.stages)

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    @property
    def failed_stage(self) -> str | None:
        return next((s.name for s in self.stages if s.status == "fail"), None)

    def text(self) -> str:
        head = (
            f"{PREFIX} {self.system}, {self.mode} job, on this machine: PBS Pro, Lmod and Cray PALS "
            "are stand-ins; no GPU, no fabric"
        )
        lines = [head, *(s.line() for s in self.stages)]
        lines += [f"{PREFIX} note: {n}" for n in self.notes]
        if self.run_dir:
            lines.append(f"{PREFIX} run directory: {self.run_dir}")
        verdict = "the site would start this job" if self.ok else f"fails at {self.failed_stage}"
        lines.append(f"{PREFIX} verdict: {verdict}")
        return "\n".join(lines)

    def to_json(self) -> str:
        data = {"stand_in": True, **asdict(self), "ok": self.ok}
        return json.dumps(data, indent=2)

    def _repr_html_(self) -> str:  # a notebook shows the plain text, monospaced
        import html

        return f"<pre>{html.escape(self.text())}</pre>"

    def __str__(self) -> str:
        return self.text()


# Why ranks die, as data: (pattern in stderr, what it means, the fix).
RANK_FAILURES: list[tuple[re.Pattern[str], str, str]] = [
    (
        re.compile(r"No module named '?hpcprof_kit"),
        "every rank died with \"No module named 'hpcprof_kit'\": the job's python3 is the site "
        "module's, and a batch job starts from a clean environment, so the venv that holds the "
        "kit is never active",
        "render the script with this kit (it activates the environment it was rendered from "
        "after the module lines), or add 'source <venv>/bin/activate' after them",
    ),
    (
        re.compile(r"could not reach the rendezvous at \S+"),
        "a rank could not reach the rendezvous",
        "check MASTER_ADDR/MASTER_PORT in stderr and the record's hsn_suffix",
    ),
    (
        re.compile(r"No module named '?(\w+)"),
        "a rank could not import a package",
        "install it into the job's environment (env/<system>/setup.sh on a login node)",
    ),
]


def tail(path: Path, n: int = 3) -> str:
    """The last ``n`` non-blank lines of a file, joined with ' | ' ('' when it is absent)."""
    if not path.exists():
        return ""
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return " | ".join(lines[-n:])
