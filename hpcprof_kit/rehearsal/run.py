"""``rehearse()``: render the exact script the kit would submit to Aurora or Polaris, run it here
the way the site would start it (a twin of PBS Pro, Lmod and Cray PALS; see
:mod:`hpcprof_kit.rehearsal.twin`), and report each stage with what broke and the fix.

Stages: render, start, modules, launch, ranks, outputs, traces (and affinity for the affinity
example). A stage that cannot be judged because an earlier one failed is SKIP.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import KitError, SpecError
from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.paths import runs_root as default_runs_root
from hpcprof_kit.rehearsal import twin as twin_mod
from hpcprof_kit.rehearsal.report import PREFIX, REPORT, Rehearsal, Stage


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
    if spec is None:
        spec = JobSpec.for_workshop(system=system)
        spec = spec if spec.account else spec.with_(account="YOUR_PROJECT")
    if spec.reservation is not None and spec.queue:  # the class's reservation, on the twin too
        reservations = {spec.queue: spec.reservation, **(reservations or {})}
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
