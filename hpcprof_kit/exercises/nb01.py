"""Notebook 01 exercises: complete a script that asks torch for its devices (run on every rank),
then predict the torch devices of one Aurora node and one tile's compute units."""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

from hpcprof_kit.exercises import feedback

# One Aurora tile as torch describes it (the ATPESC guide's printed properties,
# https://github.com/argonne-lcf/ATPESC_MachineLearning): gpu_subslice_count=56 Xe cores,
# max_compute_units = gpu_eu_count = 448 EUs.
# Private, as every truth a check compares with: no name a notebook imports gives the answer.
_TILE_XE_CORES = 56
_EUS_PER_XE_CORE = 8

# The calls the learner's my_devices.py must make: each accelerator's availability, then the
# device count and each device's properties through whichever module answered.
AVAILABILITY = ("torch.xpu.is_available", "torch.cuda.is_available")
PER_DEVICE = ("device_count", "get_device_properties")
# A rank's line wherever it lands: after the launcher's label (Hydra's "[0] " or
# "[proxy:0:0@host] ", PALS's "0: " from mpiexec --label, srun --label's "0: " or " 0: "), or
# glued to another rank's line when the two writes of an unbuffered print interleave
# ("...(2 CPUs)rank 0: ..."). Each device line names its index and the count the rank saw.
_RANK_LINE = re.compile(r"(?<!\w)rank (\d+): ")
_DEVICE_LINE = re.compile(r"(?<!\w)rank (\d+): [\w.]+:(\d+) of (\d+): ")


def _device_counts(system: str = "aurora") -> dict[str, int]:
    """Torch devices per node in each Level Zero hierarchy, from the system record.

    >>> _device_counts("polaris")
    {'FLAT': 4, 'COMPOSITE': 4}
    """
    from hpcprof_kit.systems import load_system

    topo = load_system(system).topology
    return {"FLAT": topo.gpus * topo.tiles_per_gpu, "COMPOSITE": topo.gpus}


def _tile_compute_units() -> int:
    """What torch prints as ``max_compute_units`` for one Aurora tile: its EUs, not its Xe cores."""
    return _TILE_XE_CORES * _EUS_PER_XE_CORE


def check_device_counts(
    flat: int | None,
    composite: int | None,
    compute_units: int | None = None,
    system: str = "aurora",
) -> bool:
    """Check the learner's predictions: torch devices per node in FLAT and COMPOSITE mode, and
    ``compute_units`` of one FLAT device (a tile).

    >>> check_device_counts(flat=6, composite=12, compute_units=56)  # doctest: +ELLIPSIS
    Not yet. Hint: flat and composite look swapped: in which mode is a tile a device of its own? compute_units counts EUs, not Xe cores: ...
    False
    >>> check_device_counts(None, None)
    Not yet. Hint: fill in flat, composite and compute_units (three ints) with your predictions.
    False
    """
    if flat is None or composite is None or compute_units is None:
        return feedback(False, hint="fill in flat, composite and compute_units (three ints) "
                        "with your predictions.")  # fmt: skip
    right = _device_counts(system)
    counts_ok = (flat, composite) == (right["FLAT"], right["COMPOSITE"])
    units_ok = compute_units == _tile_compute_units()
    hints = []
    # what the check saw, and the question to ask: never the operation that gives the answer
    if not counts_ok and (composite, flat) == (right["FLAT"], right["COMPOSITE"]):
        hints.append("flat and composite look swapped: in which mode is a tile a device of "
                     "its own?")  # fmt: skip
    elif not counts_ok:
        hints.append("what is one torch device in each mode, a tile or a whole GPU (section 5)? "
                     "A job starts one rank per device: count the ranks one node takes.")  # fmt: skip
    if not units_ok:
        hints.append(
            "compute_units counts EUs, not Xe cores: section 3 says what one Xe core holds."
            if compute_units == _TILE_XE_CORES
            else "compute_units counts EUs (section 3), and the question gives one tile in Xe cores."
        )
    return feedback(
        counts_ok and units_ok,
        hint=" ".join(hints),
        well_done=(
            f"Correct - {right['FLAT']} tiles in FLAT mode, {right['COMPOSITE']} GPUs in COMPOSITE "
            f"mode, and {_tile_compute_units()} compute units per tile: {_TILE_XE_CORES} Xe cores "
            f"x {_EUS_PER_XE_CORE} EUs."
        ),
    )


def _calls(source: str) -> set[str]:
    """Dotted names of every call in ``source``: ``torch.xpu.is_available``, ``acc.device_count``."""

    def dotted(node: ast.AST) -> str:
        if isinstance(node, ast.Attribute):
            return f"{dotted(node.value)}.{node.attr}"
        return node.id if isinstance(node, ast.Name) else "?"

    return {dotted(n.func) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)}


def check_my_devices(script: str | os.PathLike[str] = "my_devices.py", run=None) -> bool:
    """Check the learner's ``my_devices.py``: it asks torch itself (``is_available`` of xpu and
    cuda, then ``device_count`` and ``get_device_properties``), and every rank of ``run`` (a job
    or a run directory) printed its ``rank R: ...`` line (whatever label the launcher put before
    it), one for each device it counted.

    >>> import tempfile, pathlib
    >>> s = pathlib.Path(tempfile.mkdtemp()) / "my_devices.py"
    >>> _ = s.write_text("import torch\\nacc = torch.xpu if torch.xpu.is_available() else "
    ...                  "torch.cuda if torch.cuda.is_available() else None\\ncount = None\\n"
    ...                  "props = acc.get_device_properties(0)\\n")
    >>> check_my_devices(s)
    Not yet. Hint: my_devices.py never calls device_count: fill the blank (count = ...) with the call that counts the devices acc sees.
    False
    """
    try:
        calls = _calls(Path(script).read_text())
    except (OSError, SyntaxError) as exc:
        return feedback(False, hint=f"{script} does not read as Python ({exc}); run its cell again")
    tails = {c.rsplit(".", 1)[-1] for c in calls}
    missing = [c for c in AVAILABILITY if c not in calls] + [
        c for c in PER_DEVICE if c not in tails
    ]
    if missing:
        return feedback(
            False,
            hint=f"{Path(script).name} never calls {', '.join(missing)}: fill the blank "
            "(count = ...) with the call that counts the devices acc sees.",
        )
    if run is None:
        return feedback(True, hint="", well_done="Correct - your script asks torch itself.")
    run_dir = Path(run.run_dir if hasattr(run, "run_dir") else os.fspath(run))
    spec = json.loads((run_dir / "spec.json").read_text())
    world = int(spec.get("nodes") or 1) * int(spec.get("ranks_per_node") or 1)
    printed = (run_dir / "stdout").read_text()
    seen = sorted({int(r) for r in _RANK_LINE.findall(printed)})
    if seen != list(range(world)):
        return feedback(False, hint=f"ranks {seen} printed a line, of {world}: did the job "
                        f"complete (wait_for(job))?{_saw(printed) if not seen else ''}")  # fmt: skip
    unlisted = _unlisted_devices(printed)
    return feedback(
        not unlisted,
        hint=unlisted,
        well_done=f"Correct - your script asks torch itself, and ranks {seen} each answered.",
    )


def _saw(printed: str) -> str:
    """What the job printed, when no rank line is in it: the check says what it read."""
    first = next((ln.strip() for ln in printed.splitlines() if ln.strip()), "")
    return f" Its output starts with {first[:120]!r}." if first else " Its output is empty."


def _unlisted_devices(printed: str) -> str:
    """Why a rank's device lines do not add up (each of its ``count`` devices once, the same
    count on every line), or "" when they do."""
    listed: dict[int, tuple[set[int], set[int]]] = {}
    for rank, index, count in _DEVICE_LINE.findall(printed):
        indices, counts = listed.setdefault(int(rank), (set(), set()))
        indices.add(int(index))
        counts.add(int(count))
    for rank, (indices, counts) in sorted(listed.items()):
        if len(counts) != 1 or indices != set(range(*counts)):
            of = " or ".join(str(c) for c in sorted(counts))
            return (f"rank {rank} printed a line for devices {sorted(indices)} of {of}: each "
                    "device acc counts prints one line, all with the same count.")  # fmt: skip
    return ""
