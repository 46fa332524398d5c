"""``hpcprof-kit render | submit | status | cancel | runs``: job scripts and runs from a shell.

>>> from hpcprof_kit.cli import main
>>> main(["render", "--system", "local", "--example", "seqpar"])  # doctest: +ELLIPSIS
#!/bin/bash
...
0
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

from hpcprof_kit.errors import KitWarning, SpecError


def _spec_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--system", default="local", help="system record (aurora, polaris, slurm, local)"
    )
    p.add_argument("--example", default="train", help="train, seqpar or affinity")
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--ranks-per-node", type=int, default=2)
    p.add_argument("--walltime", default="00:10:00", help="HH:MM:SS")
    p.add_argument("--queue")
    p.add_argument("--account")
    p.add_argument("--name")
    p.add_argument("--profile", action="store_true", help="run the example under torch.profiler")
    p.add_argument("--tracer", help="vendor tracer: unitrace, nsys or ncu")
    p.add_argument(
        "--profrank", type=int, default=0, help="local rank the tracer traces on each node"
    )
    p.add_argument(
        "--rankcutoff", type=int, help="trace only global ranks below this (default: no cutoff)"
    )
    p.add_argument("--filesystems", help="':'-separated file systems (default: the system's)")
    p.add_argument("--binding", help="binding preset (default: the system's)")


def _spec(args: argparse.Namespace):
    from hpcprof_kit.jobs import JobSpec

    return JobSpec(
        system=args.system,
        example=args.example,
        nodes=args.nodes,
        ranks_per_node=args.ranks_per_node,
        walltime=args.walltime,
        queue=args.queue,
        account=args.account,
        name=args.name,
        profile=args.profile,
        tracer=args.tracer,
        profrank=args.profrank,
        rankcutoff=args.rankcutoff,
        filesystems=args.filesystems,
        binding=args.binding,
    )


@contextlib.contextmanager
def _warnings_as_lines(command: str) -> Iterator[None]:
    """The kit's warnings as one line each on stderr (``hpcprof-kit render: warning: ...``)."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", KitWarning)  # other warnings keep their filters
            yield
    finally:
        seen = set()
        for w in caught:
            text = str(w.message)
            if not issubclass(w.category, KitWarning):
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
            elif text not in seen:  # a spec validated twice warns twice
                seen.add(text)
                print(f"hpcprof-kit {command}: warning: {text}", file=sys.stderr)


def _write_script(path: str, script: str) -> None:
    target = Path(path)
    if not target.parent.is_dir():
        raise SpecError(
            f"--output {path}: the folder {target.parent} does not exist; "
            f"create it first (mkdir -p {target.parent}) or write somewhere else"
        )
    try:
        target.write_text(script)
    except OSError as exc:
        raise SpecError(
            f"--output {path}: cannot write the script ({exc.strerror}); pick a writable path"
        ) from None


def cmd_render(args: argparse.Namespace) -> int:
    if args.all:
        from hpcprof_kit.jobs.catalog import write_catalog

        for path in write_catalog(Path(args.all)):
            print(path)
        return 0
    with _warnings_as_lines("render"):
        script = _spec(args).render()
    if args.output:
        _write_script(args.output, script)
    else:
        sys.stdout.write(script)
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from hpcprof_kit.jobs import submit

    with _warnings_as_lines("submit"):
        job = submit(_spec(args), backend=args.backend)
    print(f"run directory: {job.run_dir}")
    print(f"job id: {job.job_id}")
    if args.wait:
        state = job.wait(progress=sys.stderr.isatty())
        print(f"state: {state} (exit code {job.exit_code})")
        return 0 if state == "COMPLETED" else 1
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from hpcprof_kit.jobs import Job

    job = Job.from_run_dir(args.run_dir)
    job.refresh()
    data = job.manifest
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print(f"{data['state']}  job {data['job_id']}  exit code {data.get('exit_code')}")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    from hpcprof_kit.jobs import Job

    state = Job.from_run_dir(args.run_dir).cancel()
    print(state)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from hpcprof_kit.jobs import Job, list_runs

    rows = list_runs()
    for row in rows:  # refresh the ones still going, so the table is current
        if row.get("job_id") and row.get("state") in ("QUEUED", "RUNNING"):
            row["state"] = Job.from_run_dir(Path(row["run_dir"])).refresh()
    header = ("RUN", "BACKEND", "JOB ID", "STATE", "EXIT")
    table = [header] + [
        (r["name"], r.get("backend", "-"), r.get("job_id", "-"), r.get("state", "-"),
         "-" if r.get("exit_code") is None else str(r["exit_code"]))
        for r in rows
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("render", help="print the job script for a spec (or --all DIR)")
    _spec_options(p)
    p.add_argument("-o", "--output", help="write the script to FILE instead of stdout")
    p.add_argument("--all", metavar="DIR", help="write every ready script into DIR (jobs/)")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("submit", help="submit a job; prints its run directory and job id")
    _spec_options(p)
    p.add_argument("--backend", default="auto", choices=("auto", "local", "slurm", "pbs"))
    p.add_argument("--wait", action="store_true", help="wait for the end; exit 1 unless COMPLETED")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("status", help="state of a run (from its run directory)")
    p.add_argument("run_dir")
    p.add_argument("--json", action="store_true", help="the manifest as JSON")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("cancel", help="cancel a run (from its run directory)")
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("runs", help="a table of the runs under the runs root")
    p.set_defaults(func=cmd_runs)
