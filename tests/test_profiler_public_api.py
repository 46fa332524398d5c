"""The kit drives torch.profiler through its public calls only: no module under hpcprof_kit/
assigns the profiler's internal counters (what the learner could not do at home)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "hpcprof_kit"
INTERNAL = {"step_num", "current_action", "_prev_schedule_action", "step_rec_fn"}


def _sets_internal(node: ast.AST) -> bool:
    """``setattr(obj, "step_num", ...)``."""
    return (
        isinstance(node, ast.Call)
        and getattr(node.func, "id", "") == "setattr"
        and len(node.args) > 1
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value in INTERNAL
    )


def _assigned_internals(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif _sets_internal(node):
            found.append((node.lineno, node.args[1].value))
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute) and sub.attr in INTERNAL:
                    found.append((node.lineno, sub.attr))
    return found


def test_no_module_assigns_the_profilers_internal_counters():
    hits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, name in _assigned_internals(ast.parse(path.read_text())):
            hits.append(f"{path.relative_to(PACKAGE.parent)}:{line}: .{name} = ...")
    assert not hits, "\n".join(hits)


def test_the_check_finds_such_an_assignment():
    code = "prof.step_num = 3\nprof.current_action += 1\nsetattr(prof, 'step_num', 2)\n"
    assert [n for _, n in _assigned_internals(ast.parse(code))] == [
        "step_num", "current_action", "step_num"
    ]  # fmt: skip
