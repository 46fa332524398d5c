"""``hpcprof_kit/traces/`` is a house of floors: each floor imports only from the floors below it
(and from its own, without a circle). Every import counts, inside functions too, so the order
holds when a module runs, not only when it loads.

The floors, lowest first (``docs/architecture.md`` says what each holds): ``read`` (a trace
file's formats and text, the compiled scanner, the kept arguments and ``[memory]`` events, the
cache), ``table`` (the one frame: its schema, the loader, its rows' order), ``analyses``
(breakdown, idle, ops, spread, lanes, memory, the HTA cross-check), ``view`` (the run prepared
once for a report: steps, signals, waits, arguments; per-rank summaries), ``findings`` (the
rules), ``plots`` (every picture) and ``reporting`` (panes, text, HTML, the ``--mpi`` job).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

TRACES = Path(__file__).resolve().parents[1] / "hpcprof_kit" / "traces"
PACKAGE = "hpcprof_kit.traces"
FLOORS = ("read", "table", "analyses", "view", "findings", "plots", "reporting")
# Modules beside the floors: the package's facade (it names the public API and imports each
# name lazily, by importlib, when asked) and the corpus generator, which imports no floor.
BESIDE = {"__init__": len(FLOORS), "corpus": -1, "corpus_patterns": -1}
MOST_MODULES = 16  # in one folder, not counting __init__.py


def module_of(path: Path) -> str:
    parts = list(path.relative_to(TRACES).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join([PACKAGE, *parts]) if parts != ["__init__"] else PACKAGE


def floor_of(module: str) -> int:
    """The floor's index (0 lowest) of a module of the package."""
    rest = module[len(PACKAGE) + 1 :].split(".") if module != PACKAGE else ["__init__"]
    if rest[0] in FLOORS:
        return FLOORS.index(rest[0])
    return BESIDE[rest[0]]


def modules() -> dict[str, Path]:
    return {module_of(p): p for p in sorted(TRACES.rglob("*.py"))}


def imports_of(path: Path, known: set[str]) -> list[tuple[str, int]]:
    """(module of the package, line) for every import in ``path``, wherever it stands; ``from
    P import name`` counts as an import of ``P.name`` when that is a module, else of ``P``."""
    name = module_of(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]  # fmt: skip
        for target in targets:
            while target and target not in known and target.startswith(PACKAGE + "."):
                target = target.rsplit(".", 1)[0]
            if target in known and target != name:
                out.append((target, node.lineno))
    return out


def graph() -> dict[str, list[tuple[str, int]]]:
    found = modules()
    return {m: imports_of(p, set(found)) for m, p in found.items()}


def test_every_module_of_traces_sits_on_a_declared_floor():
    strays = [m for m in modules() if m != PACKAGE and m.split(".")[2] not in (*FLOORS, *BESIDE)]
    assert not strays, (
        f"{strays} sit on no floor; put each in one of {FLOORS} (tests/test_traces_layers.py)"
    )


def test_no_module_imports_from_a_floor_above_its_own():
    upward = []
    for module, deps in graph().items():
        for dep, line in deps:
            if floor_of(dep) > floor_of(module):
                upward.append(f"{module}:{line} imports {dep}")
    assert not upward, "imports up a floor:\n" + "\n".join(upward)


def test_the_corpus_generator_imports_no_floor():
    assert graph()[f"{PACKAGE}.corpus"] == []


def test_traces_has_no_import_circle():
    g = {m: sorted({d for d, _ in deps}) for m, deps in graph().items()}
    circles = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in g[m]:
            if state.get(d) == 1:
                circles.append(" -> ".join(path[path.index(d) :] + [m, d]) if d in path else d)
            elif d not in state:
                visit(d, path + [m])
        state[m] = 2

    for m in g:
        if m not in state:
            visit(m, [])
    assert not circles, "import circles:\n" + "\n".join(circles)


@pytest.mark.parametrize("folder", [TRACES, *(TRACES / f for f in FLOORS)], ids=lambda p: p.name)
def test_no_folder_of_traces_holds_more_than_16_modules(folder):
    held = sorted(p.stem for p in folder.glob("*.py") if p.name != "__init__.py")
    assert len(held) <= MOST_MODULES, f"{folder.name}/ holds {len(held)} modules: {held}"


def test_the_layer_check_sees_an_upward_import_inside_a_function(tmp_path, monkeypatch):
    # the check itself can fail: a function-level import from a higher floor is caught
    fake = tmp_path / "traces"
    for sub in ("read", "reporting"):
        (fake / sub).mkdir(parents=True)
        (fake / sub / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "corpus.py").write_text("")
    (fake / "reporting" / "report.py").write_text("X = 1\n")
    (fake / "read" / "stream.py").write_text(
        "def f():\n    from hpcprof_kit.traces.reporting.report import X\n    return X\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "TRACES", fake)
    with pytest.raises(
        AssertionError, match=r"read\.stream:2 imports hpcprof_kit\.traces\.reporting\.report"
    ):
        test_no_module_imports_from_a_floor_above_its_own()


def test_the_layer_check_sees_a_circle_on_one_floor(tmp_path, monkeypatch):
    fake = tmp_path / "traces"
    (fake / "read").mkdir(parents=True)
    for name in ("__init__.py", "corpus.py", "read/__init__.py"):
        (fake / name).write_text("")
    (fake / "read" / "a.py").write_text("from hpcprof_kit.traces.read import b\n")
    (fake / "read" / "b.py").write_text("def f():\n    from hpcprof_kit.traces.read.a import X\n")
    monkeypatch.setattr(sys.modules[__name__], "TRACES", fake)
    with pytest.raises(AssertionError, match="read.a -> hpcprof_kit.traces.read.b -> "):
        test_traces_has_no_import_circle()
