"""Notebook 01 exercise: predict the torch devices of one Aurora node and one tile's compute units."""

from __future__ import annotations

from hpcprof_kit.exercises import feedback

# One Aurora tile as torch describes it (the ATPESC guide's printed properties,
# https://github.com/argonne-lcf/ATPESC_MachineLearning): gpu_subslice_count=56 Xe cores,
# max_compute_units = gpu_eu_count = 448 EUs.
TILE_XE_CORES = 56
EUS_PER_XE_CORE = 8

# What would give the answers away above the check cell (tests/test_exercises_hidden.py):
# "text" patterns no output or markdown above may match, "code" names no code cell above may use.
HIDDEN = {
    "check_device_counts": {
        "text": [
            r"\b12\s+(torch\s+)?(devices|tiles|ranks)\b",
            r"\b6\s+(torch\s+)?devices\b",
            r"(?i)\bflat\b[^\d\n]{0,40}\b12\b",
            r"(?i)\bcomposite\b[^\d\n]{0,40}\b6\b",
            r"\b448\b",
            r"\b56\s*[x*]\s*8\b",
        ],
        "code": ["device_counts", "HIERARCHY_NOTES", "tile_compute_units", "EUS_PER_XE_CORE"],
        "answer": "notebook_answer",
    },
}


def device_counts(system: str = "aurora") -> dict[str, int]:
    """Torch devices per node in each Level Zero hierarchy, from the system record.

    >>> device_counts("aurora")
    {'FLAT': 12, 'COMPOSITE': 6}
    """
    from hpcprof_kit.systems import load_system

    topo = load_system(system).topology
    return {"FLAT": topo.gpus * topo.tiles_per_gpu, "COMPOSITE": topo.gpus}


def tile_compute_units() -> int:
    """What torch prints as ``max_compute_units`` for one Aurora tile: its EUs, not its Xe cores.

    >>> tile_compute_units()
    448
    """
    return TILE_XE_CORES * EUS_PER_XE_CORE


def notebook_answer() -> list[int]:
    """FLAT devices, COMPOSITE devices and one tile's compute units (the answer key's).

    >>> notebook_answer()
    [12, 6, 448]
    """
    counts = device_counts("aurora")
    return [counts["FLAT"], counts["COMPOSITE"], tile_compute_units()]


def check_device_counts(
    flat: int | None,
    composite: int | None,
    compute_units: int | None = None,
    system: str = "aurora",
) -> bool:
    """Check the learner's predictions: torch devices per node in FLAT and COMPOSITE mode, and
    ``compute_units`` of one FLAT device (a tile).

    >>> check_device_counts(flat=6, composite=12, compute_units=56)
    Not yet. Hint: FLAT makes every tile a device; COMPOSITE keeps one device per GPU. Count GPUs x tiles. compute_units counts EUs, not Xe cores: how many EUs does one Xe core hold?
    False
    """
    right = device_counts(system)
    counts_ok = (flat, composite) == (right["FLAT"], right["COMPOSITE"])
    units_ok = compute_units == tile_compute_units()
    hints = []
    if not counts_ok:
        hints.append(
            "FLAT makes every tile a device; COMPOSITE keeps one device per GPU. Count GPUs x tiles."
        )
    if not units_ok:
        hints.append(
            "compute_units counts EUs, not Xe cores: how many EUs does one Xe core hold?"
            if compute_units == TILE_XE_CORES
            else "compute_units counts EUs; section 2 says how many EUs one Xe core holds."
        )
    return feedback(
        counts_ok and units_ok,
        hint=" ".join(hints),
        well_done=(
            f"Correct - {right['FLAT']} tiles in FLAT mode, {right['COMPOSITE']} GPUs in COMPOSITE "
            f"mode, and {tile_compute_units()} compute units per tile: {TILE_XE_CORES} Xe cores x "
            f"{EUS_PER_XE_CORE} EUs."
        ),
    )
