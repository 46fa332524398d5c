"""``hpcprof-kit render | submit | status | cancel | runs``: job scripts and runs from a shell.
``render --vary FIELD=V1,V2`` previews a sweep as ``sweep --dry-run`` does.

An example (``--example train``), or your own program after ``--``:
``hpcprof-kit submit --system local --wait -- python mlp.py --lr 0.1``; ``--spec`` starts
from a spec.json (or a run directory's) and the flags given change it.

>>> from hpcprof_kit.cli import main
>>> main(["render", "--system", "local", "--example", "seqpar"])  # doctest: +ELLIPSIS
#!/bin/bash
...
0
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hpcprof_kit.cli.spec_args import NEVER_RUNS_EXIT, _spec, _spec_options, _warnings_as_lines
from hpcprof_kit.errors import SpecError, SubmitError

STDERR_LINES = 8  # how much of a failed run's stderr status shows
RUN_HELP = ("run directory, its name under the runs root, or its job id as the scheduler "
            "prints it (2, 2.server, 15[3], 1234_5)")  # fmt: skip


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
    if args.vary:  # a sweep's preview, as 'sweep --dry-run' prints it
        from hpcprof_kit.cli.sweep import sweep_from_args

        if args.output:
            raise SpecError(
                "render --vary prints a sweep's preview (its variants and array script), not "
                "one job script; leave --output out, or render one variant without --vary"
            )
        with _warnings_as_lines("render"):
            sys.stdout.write(sweep_from_args(args).preview())
        return 0
    with _warnings_as_lines("render"):
        script = _spec(args).render()
    if args.output:
        _write_script(args.output, script)
    else:
        sys.stdout.write(script)
    return 0


WAIT_EXIT_HELP = (
    "wait for the end; exit 0 if COMPLETED, 1 if it ended otherwise (the reason is printed), "
    f"{NEVER_RUNS_EXIT} if the scheduler says it can never run as asked (it stays queued: "
    "cancel it and change the request)"
)


def cmd_submit(args: argparse.Namespace) -> int:
    from hpcprof_kit.jobs import submit

    with _warnings_as_lines("submit"):
        job = submit(_spec(args), backend=args.backend)
    print(f"run directory: {job.run_dir}")
    print(f"job id: {job.job_id}")
    return wait_and_say(job) if args.wait else 0


def wait_and_say(job) -> int:
    """Wait for ``job`` and print how it ended, with the scheduler's reason and what to do
    when it did not complete; the exit status ``submit --wait`` documents."""
    from hpcprof_kit.jobs.explain import can_never_run, explain, missing_report
    from hpcprof_kit.jobs.late_records import settle

    state = job.wait(progress=sys.stderr.isatty())
    if state != "COMPLETED":
        settle(job)  # the scheduler's final comment and the staged stderr may come late
    code = job.exit_code
    print(f"state: {state}" + ("" if code is None else f" (exit code {code})"))
    if state == "COMPLETED":
        if (note := missing_report(job)) is not None:
            print(note)
        return 0
    print(explain(job, cli=True))
    return (
        NEVER_RUNS_EXIT if state == "QUEUED" and can_never_run(job.manifest.get("comment")) else 1
    )


def run_path(text: str) -> Path:
    """A run directory from its path, or from its name (what ``hpcprof-kit runs`` prints)
    under the runs root."""
    from hpcprof_kit.paths import runs_root

    if Path(text).is_dir():
        return Path(text)
    root = runs_root()
    if "/" not in text and (root / text).is_dir():
        return root / text
    raise SubmitError(
        f"no run directory {text!r} here or under the runs root {root}; pass the path that "
        "submit printed, or a name that 'hpcprof-kit runs' lists (set HPCPROF_RUNS_DIR to "
        "the runs root it was made under)"
    )


def job_run_dir(text: str) -> Path:
    """A run directory from its path or name, else the one run under the runs root (sweeps'
    variants included) that answers to the job id ``text`` in any form the schedulers print
    (``2``, ``2.server``, ``15[]``, ``15[3]``, ``1234_5``: ``jobs.job_ids``). An id that
    matches several runs (a whole array, a job running variants in turn, the same number on
    two schedulers) is a SubmitError that lists them."""
    from hpcprof_kit.paths import runs_root

    try:
        return run_path(text)
    except SubmitError:
        pass
    root = runs_root()
    found = runs_with_id(text)
    if len(found) == 1:
        return found[0][0]
    if found:
        listed = "\n".join(f"  {path}  (job {data.get('job_id')}, {data.get('state')})"
                            for path, data in found)  # fmt: skip
        raise SubmitError(
            f"job id {text!r} matches {len(found)} runs under the runs root {root}:\n{listed}\n"
            "pass one of these run directories, or the job id of one run (an array's "
            "subjob as N[i], a Slurm array task as N_i)"
        )
    raise SubmitError(
        f"no run directory {text!r} here or under the runs root {root}, and no run there has "
        f"job id {text!r}; pass the run directory or job id that submit printed, or a name that "
        "'hpcprof-kit runs' lists (set HPCPROF_RUNS_DIR to the runs root it was made under)"
    )


def runs_with_id(text: str) -> list[tuple[Path, dict]]:
    """Every run under the runs root (sweeps' variants included) that answers to the job id
    ``text`` (``jobs.job_ids``), with its manifest, in the order of their folders."""
    from hpcprof_kit.jobs.job_ids import run_has_id
    from hpcprof_kit.paths import runs_root

    root = runs_root()
    found = []
    for manifest in [
        *sorted(root.glob("*/manifest.json")),
        *sorted(root.glob("*/*/manifest.json")),
    ]:
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and run_has_id(text, data):
            found.append((manifest.parent, data))
    return found


def failure_lines(run_dir: Path, n: int = STDERR_LINES) -> list[str]:
    """The last ``n`` non-empty lines of a run's stderr, for a failed status."""
    try:
        text = (run_dir / "stderr").read_text(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-n:]


def never_submitted(run_dir: Path, data: dict) -> list[str]:
    """What ``status`` says of a run that has no job id: the scheduler client's own refusal
    lines when it refused the script, else the kit's note; and how to submit it again."""
    from hpcprof_kit.jobs.submission import refusal

    refused = refusal(data.get("note"))
    if refused is not None:
        client, code, said = refused
        lines = [f"{data.get('state')}  never submitted: {client} refused it (exit {code})",
                 f"{client} said:", *(f"  {line}" for line in said)]  # fmt: skip
    else:
        lines = [f"{data.get('state')}  never submitted (it has no job id)"]
        if data.get("note"):
            lines.append(f"note: {data['note']}")
    lines.append(
        f"what to do: change what was refused, then submit again: hpcprof-kit submit --spec "
        f"{run_dir} (with the flags to change)"
    )
    return lines


def cmd_status(args: argparse.Namespace) -> int:
    from hpcprof_kit.jobs import Job
    from hpcprof_kit.jobs.backends import cancel_said
    from hpcprof_kit.jobs.rundir import RunDir

    path = job_run_dir(args.run_dir)
    data = RunDir(path).manifest()
    if not data.get("job_id") or not data.get("backend"):
        if args.json:
            print(json.dumps(data, indent=2, sort_keys=True))
        else:
            print("\n".join(never_submitted(path, data)))
        return 0
    job = Job.from_run_dir(path)
    job.refresh()  # a recent end's late comment and exit status re-read, too
    data = job.manifest
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
        return 0
    print(f"{data['state']}  job {data['job_id']}  exit code {data.get('exit_code')}")
    if data.get("note"):
        print(f"note: {data['note']}")
    if cancel_said(data):
        print(cancel_said(data))
    if data.get("comment"):
        print(f"scheduler comment: {data['comment']}")
    if data["state"] in ("FAILED", "TIMEOUT", "CANCELLED"):
        lines = failure_lines(job.run_dir)
        if lines:
            many = f"{len(lines)} lines" if len(lines) > 1 else "line"
            print(f"stderr (last {many}, {job.run_dir / 'stderr'}):")
            print("\n".join(f"  {line}" for line in lines))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    from hpcprof_kit.jobs import Job
    from hpcprof_kit.jobs.rundir import RunDir

    path = job_run_dir(args.run_dir)
    data = RunDir(path).manifest()
    if not data.get("job_id") or not data.get("backend"):
        raise SubmitError(
            f"{path} was never submitted ({data.get('state')}): there is nothing to cancel; "
            f"'hpcprof-kit status {path}' says why"
        )
    state = Job.from_run_dir(path).cancel(whole_job=args.all)
    print(state)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from hpcprof_kit.jobs import Job, list_runs
    from hpcprof_kit.jobs.sweep_runs import sweep_rows

    rows = list_runs()
    for row in rows:  # refresh the ones still going, so the table is current
        if row.get("job_id") and row.get("state") in ("QUEUED", "RUNNING"):
            row["state"] = Job.from_run_dir(Path(row["run_dir"])).refresh()
    rows += sweep_rows()  # each sweep, its variants (refreshed) under it
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
    p = sub.add_parser(
        "render",
        help="print the job script for a spec (--vary: a sweep's preview; --all DIR)",
        description="Print the job script: an example, or your own program after '--' "
        "(hpcprof-kit render --system local -- python mlp.py).",
    )
    _spec_options(p)
    p.add_argument("-o", "--output", help="write the script to FILE instead of stdout")
    p.add_argument("--all", metavar="DIR", help="write every ready script into DIR (jobs/)")
    from hpcprof_kit.cli.sweep import vary_option  # here: cli.sweep imports this module

    vary_option(p)  # with --vary: the sweep's variants and array script, as sweep --dry-run
    p.set_defaults(func=cmd_render)

    p = sub.add_parser(
        "submit",
        help="submit a job; prints its run directory and job id",
        description="Submit an example, or your own program after '--' "
        "(hpcprof-kit submit --system local --wait -- python mlp.py).",
    )
    _spec_options(p)
    p.add_argument("--backend", default="auto", choices=("auto", "local", "slurm", "pbs"))
    p.add_argument("--wait", action="store_true", help=WAIT_EXIT_HELP)
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("status", help="state of a run (its run directory, its name or job id)")
    p.add_argument("run_dir", metavar="RUN", help=RUN_HELP)
    p.add_argument("--json", action="store_true", help="the manifest as JSON")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("cancel", help="cancel a run (its run directory, its name or job id)")
    p.add_argument("run_dir", metavar="RUN", help=RUN_HELP)
    p.add_argument("--all", action="store_true",
                   help="a sweep variant that shares one PBS job with others (variants in "
                   "turn): delete that whole job, ending its other variants too")  # fmt: skip
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("runs", help="a table of the runs under the runs root")
    p.set_defaults(func=cmd_runs)
