"""What the attendee does on the twin: submit a spec (as a notebook does) or a script (``qsub``),
then wait for the end. Runs inside the twin's login or interactive environment, started by the
rehearsal as ``python -m hpcprof_kit.rehearsal.attendee REQUEST.json``; prints one JSON line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _submit_script(request: dict) -> dict:
    from hpcprof_kit.jobs import Job, JobSpec, RunDir
    from hpcprof_kit.jobs.backends import get_backend
    from hpcprof_kit.jobs.queues import walltime_seconds

    spec = JobSpec.from_json(request["spec"])
    run = RunDir.create(spec, request["runs_root"])
    run.write_new("job.sh", Path(request["script"]).read_text())
    run.write_new("spec.json", spec.to_json() + "\n")
    backend = get_backend("pbs")
    run.update(backend="pbs", state="SUBMITTING", walltime_s=walltime_seconds(spec.walltime))
    try:
        job_id = backend.submit(run.path, spec.system_record(), walltime_seconds(spec.walltime))
    except Exception as exc:
        run.update(state="FAILED", note=f"submission failed: {exc}")
        return {"run_dir": str(run.path), "error": str(exc), "backend": "pbs"}
    run.update(job_id=job_id, state="QUEUED")
    job = Job(run, backend, job_id)
    return _wait(job, "pbs")


def _submit_spec(request: dict) -> dict:
    from hpcprof_kit.errors import KitError
    from hpcprof_kit.jobs import JobSpec, submit

    spec = JobSpec.from_json(request["spec"])
    try:
        job = submit(spec, backend=request.get("backend", "auto"), runs_root=request["runs_root"])
    except KitError as exc:
        runs = sorted(Path(request["runs_root"]).glob("*/manifest.json"))
        run_dir = str(runs[-1].parent) if runs else ""
        return {"run_dir": run_dir, "error": str(exc), "backend": ""}
    return _wait(job, job.manifest.get("backend", ""))


def _wait(job, backend: str) -> dict:
    state = job.wait(progress=False)
    return {"run_dir": str(job.run_dir), "job_id": job.job_id, "backend": backend,
            "state": state, "exit_code": job.exit_code}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    request = json.loads(Path(argv[0]).read_text())
    result = _submit_script(request) if request.get("script") else _submit_spec(request)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
