"""Where each rank ran: read from the run directory that holds the traces, when there is one.

A run directory's ``manifest.json`` names the job's hosts (``hosts``, in the scheduler's
order) and its ``spec.json`` the ranks per node; a launcher places ranks on nodes in blocks
(PALS and Hydra ``mpiexec --ppn N``, ``srun`` by default), so rank ``r`` ran on host
``hosts[r // ranks_per_node]``. Traces loaded from anywhere else have no placement, and
nothing that needs one (a group of slow ranks on one node) is said of them.

>>> placement_of({"hosts": ["n0", "n1"]}, {"ranks_per_node": 4})
{'hosts': ['n0', 'n1'], 'ranks_per_node': 4}
>>> node_of({"hosts": ["n0", "n1"], "ranks_per_node": 4}, 5), node_of({}, 5)
('n1', None)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def placement_of(manifest: dict, spec: dict) -> dict[str, Any] | None:
    """``{"hosts", "ranks_per_node"}`` from a run's manifest and spec, or None when either is
    missing (a local run on one host has one: every rank on it)."""
    hosts = manifest.get("hosts")
    per_node = spec.get("ranks_per_node")
    if not isinstance(hosts, list) or not hosts or not isinstance(per_node, int) or per_node < 1:
        return None
    return {"hosts": [str(h) for h in hosts], "ranks_per_node": per_node}


def read_placement(path: str | Path) -> dict[str, Any] | None:
    """The placement of the run whose traces ``path`` names (the run directory itself, or its
    ``traces/`` folder); None for traces outside a run directory or an unreadable record."""
    p = Path(path)
    for run_dir in (p, p.parent):
        try:
            manifest = json.loads((run_dir / "manifest.json").read_text())
            spec = json.loads((run_dir / "spec.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(manifest, dict) and isinstance(spec, dict):
            return placement_of(manifest, spec)
    return None


def node_of(placement: dict | None, rank: int) -> str | None:
    """The host rank ``rank`` ran on, or None when the placement is unknown or too short."""
    if not placement or "hosts" not in placement:
        return None
    i = int(rank) // int(placement["ranks_per_node"])
    return placement["hosts"][i] if i < len(placement["hosts"]) else None
