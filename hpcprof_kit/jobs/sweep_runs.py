"""The sweeps under the runs root as rows of ``hpcprof-kit runs``: each sweep, then its
variants under it (their run directories live inside the sweep's folder, where the plain
runs' listing does not look), those still going asked of their scheduler once."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hpcprof_kit.jobs.rundir import default_runs_root

__all__ = ["sweep_rows"]


def sweep_rows(runs_root: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """One row per sweep (``name`` its folder with a slash; ``state`` how many variants are
    in each state; ``job_id`` the scheduler jobs holding them), then one per variant that has a run directory (``name`` indented under
    the sweep's, the manifest's fields beside it), sweeps oldest first."""
    root = default_runs_root(runs_root)
    sweeps = []
    for path in root.glob("*/sweep.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        sweeps.append((str(data.get("created_at", "")), path.parent, data))
    rows: list[dict[str, Any]] = []
    for _, folder, data in sorted(sweeps, key=lambda item: (item[0], item[1].name)):
        variants = []
        for entry in data.get("variants", []):
            run = folder / entry["run_dir"] if entry.get("run_dir") else None
            manifest = _manifest(run) if run else {}
            if manifest.get("job_id") and manifest.get("state") in ("QUEUED", "RUNNING"):
                from hpcprof_kit.jobs.handle import Job

                Job.from_run_dir(run).refresh()  # so the table is current
                manifest = _manifest(run)
            variants.append({
                "name": f"  {folder.name}/{entry['run_dir']}" if run
                else f"  {folder.name}/(variant {entry.get('index')}: no run yet)",
                **manifest, "run_dir": str(run) if run else "",
                "state": manifest.get("state", entry.get("state", "NEW")),
            })  # fmt: skip
        counts: dict[str, int] = {}
        for v in variants:
            counts[v["state"]] = counts.get(v["state"], 0) + 1
        summary = ", ".join(f"{n} {state}" for state, n in counts.items())
        jobs = list(dict.fromkeys(str(v.get("array_job_id") or v.get("job_id"))
                                  for v in variants if v.get("job_id")))  # fmt: skip
        backends = list(dict.fromkeys(str(v["backend"]) for v in variants if v.get("backend")))
        row = {"name": f"{folder.name}/", "state": f"sweep: {summary or 'no variants'}"}
        if jobs and backends != ["local"]:  # a local variant's id names only its process
            row["job_id"] = ",".join(jobs)
        if backends:
            row["backend"] = ",".join(backends)
        rows.append(row)
        rows.extend(variants)
    return rows


def _manifest(run: Path) -> dict[str, Any]:
    try:
        data = json.loads((run / "manifest.json").read_text())
    except (OSError, ValueError):
        return {"state": "UNREADABLE"}
    return data if isinstance(data, dict) else {"state": "UNREADABLE"}
