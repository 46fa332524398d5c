"""``hpcprof-kit explain JOB_OR_RUN``: what happened to a job and what to do next.

The run is its directory, its name under the runs root (what ``hpcprof-kit runs`` lists), or
its job id in any form the schedulers print (``2``, ``2.server``, ``15[3]``, ``1234_5``; ``15[]``
names every variant of an array: they are listed). It prints :func:`hpcprof_kit.jobs.explain.explain` in the command's words: the
state, the exit code and signal from the job's own record, the scheduler's reason, the last
lines of stderr, and the next step (for a job that can never run: change the request). A run
that was never submitted shows the scheduler client's own refusal, as ``status`` does.

>>> from hpcprof_kit.cli import main
>>> main(["explain", "no-such-run"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hpcprof_kit.errors import SubmitError


def job_run_dir(text: str) -> Path:
    """A run directory from its path or name, else the one run under the runs root (sweeps'
    variants included) that answers to the job id ``text`` in any form the schedulers print
    (``2``, ``2.server``, ``15[]``, ``15[3]``, ``1234_5``: ``jobs.job_ids``). An id that
    matches several runs (a whole array, a job running variants in turn, the same number on
    two schedulers) is a SubmitError that lists them."""
    from hpcprof_kit.cli.jobs import run_path
    from hpcprof_kit.jobs.job_ids import run_has_id
    from hpcprof_kit.paths import runs_root

    try:
        return run_path(text)
    except SubmitError:
        pass
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
        f"no run directory {text!r} here, and no run under the runs root {root} has job id "
        f"{text!r}; pass the run directory or job id that submit printed, or a name that "
        "'hpcprof-kit runs' lists (set HPCPROF_RUNS_DIR to the runs root it was made under)"
    )


def cmd_explain(args: argparse.Namespace) -> int:
    from hpcprof_kit.cli.jobs import never_submitted
    from hpcprof_kit.jobs import Job
    from hpcprof_kit.jobs.explain import explain
    from hpcprof_kit.jobs.rundir import RunDir

    path = job_run_dir(args.job)
    data = RunDir(path).manifest()
    if not data.get("job_id") or not data.get("backend"):
        print("\n".join(never_submitted(path, data)))
        return 0
    job = Job.from_run_dir(path)
    job.refresh()
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
