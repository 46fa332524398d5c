"""Notebook 01 exercise: how many torch devices does one Aurora node show?"""

from __future__ import annotations

from hpcprof_kit.exercises import feedback


def device_counts(system: str = "aurora") -> dict[str, int]:
    """Torch devices per node in each Level Zero hierarchy, from the system record.

    >>> device_counts("aurora")
    {'FLAT': 12, 'COMPOSITE': 6}
    """
    from hpcprof_kit.systems import load_system

    topo = load_system(system).topology
    return {"FLAT": topo.gpus * topo.tiles_per_gpu, "COMPOSITE": topo.gpus}


def check_device_counts(flat: int | None, composite: int | None, system: str = "aurora") -> bool:
    """Check the learner's device counts for FLAT and COMPOSITE mode.

    >>> check_device_counts(flat=6, composite=12)
    Not yet. Hint: FLAT makes every tile a device; COMPOSITE keeps one device per GPU. Count GPUs x tiles.
    False
    """
    right = device_counts(system)
    return feedback(
        (flat, composite) == (right["FLAT"], right["COMPOSITE"]),
        hint="FLAT makes every tile a device; COMPOSITE keeps one device per GPU. Count GPUs x tiles.",
        well_done=f"Correct - {right['FLAT']} tiles in FLAT mode, {right['COMPOSITE']} GPUs in COMPOSITE mode.",
    )
