"""``rehearse()``: render the exact script the kit would submit to Aurora or Polaris, run it here
the way the site would start it (a twin of PBS Pro, Lmod and Cray PALS; see
:mod:`hpcprof_kit.rehearsal.twin`), and report each stage with what broke and the fix.

Stages: render, start, modules, launch, ranks, outputs, traces (and affinity for the affinity
example). A stage that cannot be judged because an earlier one failed is SKIP.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import KitError, SpecError
from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.paths import runs_root as default_runs_root
from hpcprof_kit.rehearsal import twin as twin_mod

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


def _tail(path: Path, n: int = 3) -> str:
    if not path.exists():
        return ""
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return " | ".join(lines[-n:])


def rehearse(
    spec: JobSpec | None = None,
    *,
    system: str = "aurora",
    script: str | os.PathLike[str] | None = None,
    interactive: bool = False,
    runs_root: str | os.PathLike[str] | None = None,
    modules_missing: tuple[str, ...] = (),
    reservations: dict[str, dict[str, Any]] | None = None,
    keep_twin: bool = False,
    timeout_s: float = 900.0,
    backend: str = "auto",
) -> Rehearsal:
    """Rehearse ``spec`` (or an existing ``script`` with the spec that describes it) on a twin
    of its system. ``interactive`` starts it from inside an interactive job (``qsub -I``), as
    a notebook on the compute node does; else it is submitted as a batch job. ``backend``
    is what ``submit()`` is asked for ('pbs' inside an interactive job shows what a second
    ``qsub`` meets there).

    >>> result = rehearse(JobSpec(system="aurora", account="P", ranks_per_node=1))  # doctest: +SKIP
    >>> result.ok                                                                   # doctest: +SKIP
    True
    """
    from hpcprof_kit.workshop import current

    spec = spec if spec is not None else JobSpec(system=system, account="YOUR_PROJECT")
    ws = current()
    if ws.system == spec.system:  # the class's reservation exists on the twin's PBS too
        reservations = {**ws.reservations(), **(reservations or {})}
    record = spec.system_record()
    mode = "interactive" if interactive else "batch"
    result = Rehearsal(record.name, mode)
    root = default_runs_root(runs_root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    twin_root = (
        root / ".rehearsals" / f"{record.name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    )
    try:
        twin = twin_mod.build(
            twin_root, record, nodes=spec.nodes, modules_missing=modules_missing,
            reservations=reservations, interactive_queue=spec.queue or record.default_queue
            if interactive else "",
        )  # fmt: skip
    except SpecError as exc:
        result.stages.append(Stage("render", "fail", str(exc)))
        return result
    try:
        return _run(result, twin, spec, script, interactive, root, timeout_s, backend)
    finally:
        if result.run_dir:
            shutil.copy(twin.log_path, Path(result.run_dir) / "rehearsal_log.jsonl")
            (Path(result.run_dir) / REPORT).write_text(result.to_json() + "\n")
            (Path(result.run_dir) / "rehearsal.txt").write_text(result.text() + "\n")
        if not keep_twin:
            shutil.rmtree(twin_root, ignore_errors=True)


def _run(result, twin, spec, script, interactive, root, timeout_s, backend) -> Rehearsal:
    from hpcprof_kit.rehearsal import stages

    site_spec = spec.with_(venv=str(twin.kit_venv)) if spec.venv is None else spec
    if script is None:
        try:
            text = site_spec.render()
        except KitError as exc:
            result.stages.append(Stage("render", "fail", str(exc), "correct the spec"))
            return result
        result.stages.append(
            Stage("render", "ok", f"{len(text.splitlines())} lines, as submit() writes them")
        )
    else:
        result.stages.append(Stage("render", "ok", f"the given script {Path(script).name}"))
    request = {"spec": site_spec.to_json(), "runs_root": str(root), "backend": backend,
               "script": str(Path(script).resolve()) if script else ""}  # fmt: skip
    request_path = twin.root / "request.json"
    request_path.write_text(json.dumps(request))
    env = twin.login_env()
    if interactive:
        env.update(_interactive_env(twin, spec))
    argv = [str(twin.kit_venv / "bin" / "python3"), "-m", "hpcprof_kit.rehearsal.attendee",
            str(request_path)]  # fmt: skip
    try:
        done = subprocess.run(argv, env=env, cwd=twin.home, capture_output=True, text=True,
                              timeout=timeout_s)  # fmt: skip
    except subprocess.TimeoutExpired:
        result.stages.append(
            Stage("start", "fail", f"the job did not end within {timeout_s:.0f} s")
        )
        return result
    try:
        outcome = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        detail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        result.stages.append(Stage("start", "fail", f"the submission crashed: {detail}"))
        return result
    result.run_dir = outcome.get("run_dir", "")
    stages.judge(result, twin, spec, outcome, script is not None)
    return result


def _interactive_env(twin, spec: JobSpec) -> dict[str, str]:
    """An attendee's Jupyter kernel on the compute node of ``qsub -I``: modules loaded, venv on."""
    nodefile = twin.root / "pbs" / "interactive.nodes"
    nodefile.write_text("".join(f"{h}\n" for h in twin.hosts))
    info = twin.config["interactive"]
    site_python = twin.config["site_python"]
    loaded = [
        m["name"] for m in twin.config["modules"] if m["default"] or "python" in m["provides"]
    ]
    return {
        "PBS_JOBID": info["id"],
        "PBS_NODEFILE": str(nodefile),
        "PBS_ENVIRONMENT": "PBS_INTERACTIVE",
        "PBS_QUEUE": info["queue"],
        "PBS_O_WORKDIR": str(twin.home),
        "LOADEDMODULES": ":".join(loaded),
        "PATH": f"{twin.kit_venv / 'bin'}:{site_python}:{twin.bin}:{twin_mod.DEFAULT_PATH}",
    }


__all__ = ["PREFIX", "Rehearsal", "Stage", "rehearse"]
