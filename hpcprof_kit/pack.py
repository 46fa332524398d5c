"""The instructor's reference pack: the workshop's runs recorded on the site the day before,
for attendees whose own job waits in the queue or fails, and for laptops without a GPU lane.

:func:`record_pack` runs the reference sweeps of a system (:func:`reference_sweeps`: eager
and compiled training, profiled; the sequence-parallel example over dtypes and, where the
system has them, 1 and 2 nodes; one vendor-tracer run) into the pack directory the workshop
file names (``pack = "..."``), with ``pack.json`` (every run: what it is, its values, its run
directory and state) and a ``README.md`` saying the same in words. Running it again runs only
what is missing or did not complete: nothing written is overwritten.

In a notebook, :func:`run_or_pack` gives the run directory to analyse: the attendee's own when
their job completed, else the pack's run of the same example and arguments, saying so.

>>> [name for name, _, _, _ in reference_sweeps("local")]
['train', 'seqpar']
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import SpecError

PACK_FILE = "pack.json"
# what makes a pack run stand in for an attendee's: the same example, arguments and layout
MATCH = ("example", "command", "args", "nodes", "ranks_per_node", "profile", "tracer")


def reference_sweeps(system: str) -> list[tuple[str, Any, dict[str, list], str]]:
    """``(name, base spec, grid, what it is)`` of the workshop's reference runs on ``system``
    (the workshop file's project, queue and filesystems apply)."""
    from hpcprof_kit.jobs import JobSpec
    from hpcprof_kit.systems import load_system

    record = load_system(system)
    nodes = [1, 2] if max((q.max_nodes for q in record.queues.values()), default=1) >= 2 else [1]
    out = [
        ("train", JobSpec.for_workshop(system=system, example="train", profile=True),
         {"--compile-where": ["none", "ddp", "model"]},
         "DDP training, profiled: eager, torch.compile(DDP(model)), DDP(torch.compile(model)) "
         "(notebook 05's sweep)"),
        ("seqpar", JobSpec.for_workshop(system=system, example="seqpar"),
         {"--dtype": ["float32", "bfloat16"], "nodes": nodes},
         f"sequence parallel timing over dtypes and {' and '.join(map(str, nodes))} node(s) "
         "(notebook 08)"),
    ]  # fmt: skip
    tracer = record.extra.get("pack_tracer")  # the record names one where the site has it
    if tracer:
        out.append(
            ("tracer", JobSpec.for_workshop(system=system, example="train", tracer=tracer), {"nodes": [1]},
             f"one {tracer} run of the training example (notebook 06)")
        )  # fmt: skip
    return out


def record_pack(
    pack: str | os.PathLike[str],
    system: str,
    *,
    backend: str = "auto",
    only: tuple[str, ...] = (),
    app_args: tuple[str, ...] = (),
) -> Path:
    """Run the reference sweeps of ``system`` (or the ``only`` ones) into ``pack``; returns the
    pack directory. A pack of another system is refused; a pack of this one is completed:
    each sweep runs again only its missing or failed variants. ``app_args`` go to every run's
    app (a smaller problem for a rehearsal: ``("--steps", "3")``)."""
    from hpcprof_kit.jobs.sweep import Sweep

    folder = Path(pack).resolve()
    sweeps = reference_sweeps(system)
    unknown = sorted(set(only) - {name for name, *_ in sweeps})
    if unknown:
        raise SpecError(f"pack sweeps {unknown} are not reference sweeps of {system}; pick "
                        f"from {[name for name, *_ in sweeps]}")  # fmt: skip
    index = read_index(folder) if (folder / PACK_FILE).exists() else None
    if index is not None and index["system"] != system:
        raise SpecError(f"{folder} holds a pack of {index['system']}, not {system}; name "
                        "another folder for this one")  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    index = index or {"system": system, "created_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
                      "sweeps": {}}  # fmt: skip
    for name, base, grid, about in sweeps:
        if only and name not in only:
            continue
        known = index["sweeps"].get(name)
        base = base.with_(args=(*base.args, *app_args)) if app_args else base
        sweep = Sweep.load(folder / known["path"]) if known else Sweep(base, grid, folder)
        sweep.run(backend=backend, wait=True)
        index["sweeps"][name] = {"about": about, "path": sweep.path.name,
                                 "runs": _runs(sweep)}  # fmt: skip
        _write(folder, index)  # after each sweep: a pack cut short still says what it holds
    return folder


def _runs(sweep) -> list[dict[str, Any]]:
    out = []
    for entry in sweep.record()["variants"]:
        run_dir = entry.get("run_dir")
        spec = {}
        if run_dir and (sweep.path / run_dir / "spec.json").exists():
            spec = json.loads((sweep.path / run_dir / "spec.json").read_text())
        out.append({"label": entry["label"], "values": entry["values"],
                    "state": entry.get("state"),
                    "run_dir": f"{sweep.path.name}/{run_dir}" if run_dir else None,
                    "spec": {k: spec.get(k) for k in MATCH}})  # fmt: skip
    return out


def _write(folder: Path, index: dict) -> None:
    tmp = folder / f".{PACK_FILE}.tmp"
    tmp.write_text(json.dumps(index, indent=2) + "\n")
    tmp.replace(folder / PACK_FILE)
    lines = [f"# Reference pack: {index['system']}", "",
             "Runs recorded by `hpcprof-kit workshop record-pack` for attendees whose own job "
             "is missing or failed; notebooks offer them through `run_or_pack(job)`.", ""]  # fmt: skip
    for name, sweep in index["sweeps"].items():
        lines += [
            f"## {name}: {sweep['about']}",
            "",
            "| run | state | directory |",
            "|---|---|---|",
        ]
        lines += [f"| {r['label']} | {r['state']} | `{r['run_dir']}` |" for r in sweep["runs"]]
        lines.append("")
    (folder / "README.md").write_text("\n".join(lines))


def read_index(folder: str | os.PathLike[str]) -> dict:
    """A pack's ``pack.json``."""
    path = Path(folder) / PACK_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SpecError(f"{path} is not a reference pack ({exc}); record one with "
                        "'hpcprof-kit workshop record-pack'") from None  # fmt: skip


def pack_run(spec: dict[str, Any], pack: str | os.PathLike[str]) -> Path | None:
    """The pack's completed run of the same example, arguments and layout as ``spec`` (a
    spec's dict), or None."""
    folder = Path(pack)
    if not (folder / PACK_FILE).exists():
        return None
    index = read_index(folder)
    if index["system"] != spec.get("system"):
        return None
    want = {k: _norm(spec.get(k)) for k in MATCH}
    for sweep in index["sweeps"].values():
        for run in sweep["runs"]:
            same = {k: _norm(run["spec"].get(k)) for k in MATCH} == want
            if same and run["state"] == "COMPLETED" and run["run_dir"]:
                return folder / run["run_dir"]
    return None


def _norm(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def run_or_pack(job, pack: str | os.PathLike[str] | None = None) -> Path:
    """The run directory to analyse: ``job``'s when it completed; else the reference pack's
    run of the same spec (``pack``, default the workshop file's), saying so; else ``job``'s
    own, with what the pack lacks."""
    from hpcprof_kit import workshop

    state = job.refresh()
    if state == "COMPLETED":
        return Path(job.run_dir)
    pack = pack if pack is not None else workshop.current().pack
    spec = json.loads((Path(job.run_dir) / "spec.json").read_text())
    found = pack_run(spec, pack) if pack else None
    if found is None:
        why = (
            "no reference pack is named (workshop file: pack = ...)"
            if not pack
            else (f"the pack {pack} has no completed run of this spec")
        )
        print(f"your job is {state}, and {why}: the cells below read your own run directory")
        return Path(job.run_dir)
    print(f"your job is {state}: the cells below read the instructor's reference run {found}")
    return found
