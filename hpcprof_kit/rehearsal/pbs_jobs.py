"""The site twin's PBS job table: one JSON file per job under ``pbs/jobs``, written whole
(a reader never sees half a job), with the ids and substates PBS Pro gives."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hpcprof_kit.rehearsal.twin import Twin

DELETED = 91  # substate of a deleted job
FINISHED, FAILED_SUBSTATE = 92, 93


def jobs_dir(twin: Twin) -> Path:
    return twin.root / "pbs" / "jobs"


def _job_path(twin: Twin, job_id: str) -> Path:
    return jobs_dir(twin) / f"{job_id.split('.')[0]}.json"


def read_job(twin: Twin, job_id: str) -> dict | None:
    path = _job_path(twin, job_id)
    return json.loads(path.read_text()) if path.exists() else None


def write_job(twin: Twin, job: dict) -> None:
    path = _job_path(twin, job["id"])
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(job, indent=1))
    os.replace(tmp, path)


def jobs_in(twin: Twin, queue: str) -> int:
    live = [json.loads(p.read_text()) for p in jobs_dir(twin).glob("*.json")]
    live = [j for j in live if not j.get("array_id")]  # a subjob counts through its array
    count = sum(
        len(j.get("remaining", [])) if j.get("array") else 1
        for j in live
        if j["queue"] == queue and j["job_state"] in ("Q", "H", "R", "B")
    )
    interactive = twin.config.get("interactive")
    return count + (1 if interactive and interactive["queue"] == queue else 0)


def next_id(twin: Twin, array: bool = False) -> str:
    counter = twin.root / "pbs" / "next_id"
    seq = int(counter.read_text()) if counter.exists() else 4100
    counter.write_text(str(seq + 1))
    return f"{seq}{'[]' if array else ''}.{twin.config['system']}-pbs-twin"


def subjob_id(parent_id: str, index: int) -> str:
    seq, _, server = parent_id.partition(".")
    return f"{seq.rstrip('[]')}[{index}].{server}"


def set_state(twin: Twin, job_id: str, letter: str) -> None:
    job = read_job(twin, job_id)
    if job is not None:
        job["job_state"] = letter
        write_job(twin, job)
