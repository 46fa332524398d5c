"""``hpcprof-kit explain JOB_OR_RUN``: what happened to a job and what to do next.

The run is its directory, its name under the runs root (what ``hpcprof-kit runs`` lists), or
its job id in any form the schedulers print (``2``, ``2.server``, ``15[3]``, ``1234_5``). The id of
a job that holds several variants of a sweep (``15[]``, or one PBS job running them in turn)
lists each variant, its state and exit code, and the job's own exit status. It prints :func:`hpcprof_kit.jobs.explain.explain` in the command's words: the
state, the exit code and signal from the job's own record, the scheduler's reason, the last
lines of stderr, and the next step (for a job that can never run: change the request). A run
that was never submitted shows the scheduler client's own refusal, as ``status`` does.

>>> from hpcprof_kit.cli import main
>>> main(["explain", "no-such-run"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse


def cmd_explain(args: argparse.Namespace) -> int:
    from hpcprof_kit.cli.jobs import job_run_dir, never_submitted, run_path, runs_with_id
    from hpcprof_kit.errors import SubmitError
    from hpcprof_kit.jobs import Job
    from hpcprof_kit.jobs.explain import explain
    from hpcprof_kit.jobs.late_records import settle
    from hpcprof_kit.jobs.rundir import RunDir
    from hpcprof_kit.jobs.shared_job import explain_shared_job, is_shared_job

    try:
        run_path(args.job)
    except SubmitError:  # a job id: one that holds a sweep's variants is explained whole
        found = runs_with_id(args.job)
        if is_shared_job(found):
            print(explain_shared_job(args.job, found))
            return 0
    path = job_run_dir(args.job)
    data = RunDir(path).manifest()
    if not data.get("job_id") or not data.get("backend"):
        print("\n".join(never_submitted(path, data)))
        return 0
    job = Job.from_run_dir(path)
    settle(job)  # a job that has just ended: its scheduler's final word first
    print(explain(job, cli=True))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain",
        help="what happened to a job (run directory, its name, or job id) and what to do next",
        description=__doc__.split("\n\n")[1],
    )
    p.add_argument("job", metavar="JOB_OR_RUN", help="run directory, its name, or its job id")
    p.set_defaults(func=cmd_explain)
