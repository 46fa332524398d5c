"""Why a job wrote no trace: the run did not complete, or your script's profiler code misses a
call (``prof.step()``, an export) or exports where the kit does not look.

The check reads your script as text (nothing is run): it finds ``torch.profiler.profile``,
``.step()``, ``export_chrome_trace`` / ``tensorboard_trace_handler`` and where the export goes.
The trace loader adds its findings to "no trace files" when the folder is in a run directory.

>>> print(check_profiler_script('''
... from torch.profiler import profile, schedule
... prof = profile(schedule=schedule(wait=1, warmup=1, active=2))
... prof.start()
... for step in range(6):
...     train_step()
... prof.stop()
... prof.export_chrome_trace("/tmp/trace.json")
... ''')[0])
never calls prof.step(): with a schedule the profiler records nothing until step() moves it through wait and warmup; call prof.step() once at the end of every training step
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

EXPORTS = ("export_chrome_trace", "tensorboard_trace_handler")
TRACES = "traces"  # where the kit looks in a run directory


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def _name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def _path_text(node: ast.AST | None) -> str | None:
    """The literal start of a path argument ('traces/x-{rank}.json' for an f-string)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{...}" for v in node.values)
    return None


def _export_problem(call: ast.Call) -> str | None:
    target = _path_text(call.args[0] if call.args else None)
    if target is None or target.startswith("{"):
        return None  # a variable: the kit cannot tell where it points
    if target.startswith("/"):
        return (
            f"exports to {target!r}, an absolute path outside the job's run directory (on a "
            f"compute node /tmp is the node's own): write to a relative '{TRACES}/...' path; "
            "the job starts in its run directory"
        )
    folder = target.lstrip("./").split("/", 1)[0] if "/" in target else ""
    if folder != TRACES:
        return (
            f"exports to {target!r}: the kit reads <run>/{TRACES}/; write "
            f"'{TRACES}/<name>-{{rank}}-of-{{world}}.json', or load that folder yourself"
        )
    return None


def check_profiler_script(source: str) -> list[str]:
    """What in a script's profiler code keeps its traces from the kit, one sentence each."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"the script does not parse (line {exc.lineno}): {exc.msg}"]
    calls = _calls(tree)
    names = [_name(c) for c in calls]
    if "profile" not in names:
        return ["creates no torch.profiler.profile(...): nothing was profiled"]
    problems = []
    if "step" not in names:
        problems.append(
            "never calls prof.step(): with a schedule the profiler records nothing until step() "
            "moves it through wait and warmup; call prof.step() once at the end of every "
            "training step"
        )
    exports = [c for c in calls if _name(c) in EXPORTS]
    if not exports:
        problems.append(
            "never exports a trace: call prof.export_chrome_trace(f'traces/<name>-{rank}-of-"
            "{world}.json') after prof.stop(), or pass on_trace_ready=torch.profiler."
            "tensorboard_trace_handler('traces') to profile(...)"
        )
    problems += [p for c in exports if (p := _export_problem(c))]
    return problems


def _script(command: list[str], run_dir: Path) -> Path | None:
    for word in command:
        if word.endswith(".py"):
            path = Path(word) if Path(word).is_absolute() else run_dir / word
            return path if path.is_file() else None
    return None


def why_no_traces(run_dir: str | Path) -> str | None:
    """Why a run directory holds no trace, in a sentence or two; None when nothing is found.

    >>> why_no_traces("no/such/run") is None
    True
    """
    run_dir = Path(run_dir)
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    reasons = []
    state = manifest.get("state")
    if state and state != "COMPLETED":  # a manifest without a state says nothing here
        code = manifest.get("exit_code")
        reasons.append(
            f"the run is {state}" + (f" (exit code {code})" if code is not None else "")
            + ": see why with hpcprof_kit.jobs.explain(job)"
        )  # fmt: skip
    try:
        command = json.loads((run_dir / "spec.json").read_text()).get("command") or []
    except (OSError, ValueError):
        command = []
    script = _script(command, run_dir)
    if script is not None:
        problems = check_profiler_script(script.read_text(errors="replace"))
        if problems:
            reasons.append(f"{script.name} " + "; it ".join(problems))
    return "; ".join(reasons) or None
