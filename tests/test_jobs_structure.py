"""The jobs layer's shape: a spec is data; resolving it against its system (the record read once)
gives the job the templates render; no module of the kit imports itself back in a circle."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

import hpcprof_kit
from hpcprof_kit import systems
from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.jobs.render import render_script
from hpcprof_kit.jobs.resolved import ResolvedJob

PACKAGE = Path(hpcprof_kit.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """Every kit module ``path`` imports, at the top, in a function or under TYPE_CHECKING."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
    return {m for m in found if m in modules}


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: _imports(path, set(files)) - {name} for name, path in files.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), packages' faces left out:
    an ``__init__`` that only hands names on is how a package is entered, not a dependency."""
    faces = {m for m, p in ((m, PACKAGE.parent / m.replace(".", "/")) for m in graph) if p.is_dir()}
    graph = {m: deps - faces for m, deps in graph.items() if m not in faces}
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_of_the_kit_imports_itself_back_in_a_circle():
    assert _circles(_graph()) == []


def test_spec_resolved_and_render_depend_one_way():
    graph = _graph()
    assert "hpcprof_kit.jobs.spec" not in graph["hpcprof_kit.jobs.resolved"]
    assert "hpcprof_kit.jobs.spec" not in graph["hpcprof_kit.jobs.render"]
    assert "hpcprof_kit.jobs.resolved" in graph["hpcprof_kit.jobs.spec"]
    assert "hpcprof_kit.jobs.render" in graph["hpcprof_kit.jobs.spec"]


def test_the_circle_finder_sees_a_circle(tmp_path, monkeypatch):
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_resolving_decides_queue_launch_binding_tracer_and_command():
    spec = JobSpec(system="aurora", nodes=2, ranks_per_node=12, account="P", tracer="unitrace")
    job = spec.resolve()
    assert isinstance(job, ResolvedJob)
    assert job.queue.name == job.queue_name == "debug" and job.queue.max_nodes == 2
    assert job.launch.startswith("mpiexec -n 24 -ppn 12 --pmi=pmix --cpu-bind list:4-7:8-11")
    assert job.binding.preset == "alcf-4core" and job.binding.wrapper == ""
    assert job.tracing.tracer == "unitrace" and job.tracing.traced_ranks == (
        "local rank 0 of every node (ranks 0, 12)"
    )
    assert job.tracing.module_lines[-2:][0].startswith("module load ")
    assert job.command == ("python3", "-m", "hpcprof_kit.apps.train")
    assert (
        job.command_line() == 'bash "$HPCPROF_RUN_DIR/tracer.sh" python3 -m hpcprof_kit.apps.train'
    )
    assert render_script(job) == spec.render()


def _count_record_reads(monkeypatch) -> list[str]:
    reads: list[str] = []
    real = systems.tomllib.load

    def counting(fh):
        reads.append(str(Path(fh.name).relative_to(PACKAGE)))
        return real(fh)

    monkeypatch.setattr(systems.tomllib, "load", counting)
    systems._read_record.cache_clear()
    return reads


def test_one_render_reads_the_system_record_once(monkeypatch):
    reads = _count_record_reads(monkeypatch)
    spec = JobSpec(system="polaris", nodes=2, ranks_per_node=4, account="P", tracer="nsys")
    spec.render()
    assert reads.count("systems/polaris.toml") == 1
    spec.with_(nodes=1).render()  # the same file, unchanged: not read again
    assert reads.count("systems/polaris.toml") == 1


def test_a_changed_record_is_read_again(monkeypatch, tmp_path):
    source = Path(systems.__file__).parent / "local.toml"
    shutil.copy(source, tmp_path / "lab.toml")
    text = (tmp_path / "lab.toml").read_text().replace('name = "local"', 'name = "lab"')
    (tmp_path / "lab.toml").write_text(text)
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(tmp_path))
    first = systems.load_system("lab")
    (tmp_path / "lab.toml").write_text(text + "\n# edited: the cache must see it\n" + " " * 7)
    second = systems.load_system("lab")
    assert first.name == second.name == "lab"
    assert first is not second  # a new version of the file is parsed anew


@pytest.mark.parametrize("system", ["local", "slurm", "aurora", "polaris"])
def test_resolved_job_renders_what_the_spec_renders_on_every_system(system):
    record = systems.load_system(system)
    spec = JobSpec(system=system, account="P" if record.account_required else None)
    assert render_script(spec.resolve()) == spec.render()
