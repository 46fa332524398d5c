"""Analyse a run's traces as an MPI job: tables and plots of every rank, summaries first.

    mpiexec -n 8 python -m hpcprof_kit.apps.analyze runs/train_aurora_N64_R12_.../ [--out DIR]

The MPI ranks share the trace files out, each loads one rank file at a time and summarises
it (:mod:`hpcprof_kit.traces.reporting.mpi_summary`); rank 0 prints the per-rank summary table and
writes ``tables/*.csv``, ``plots/*.png`` and ``summaries/rank-<r>.npz`` under ``--out``
(default: this job's run directory, ``$HPCPROF_RUN_DIR``). Submitted through the jobs layer::

    JobSpec(example="analyze", args=["/abs/path/to/run"], nodes=2).render()
    hpcprof-kit submit --example analyze -- --json /abs/path/to/run

(an absolute path: the job starts in its own run directory).

Exit status: 0 when the run was analysed, even with files that did not load (named on
stderr and in ``tables/failures.json``); 2 when no file loaded or the path holds no traces.
"""

from __future__ import annotations

import argparse
import sys

from hpcprof_kit.apps._common import run_main
from hpcprof_kit.errors import SpecError
from hpcprof_kit.paths import current_run_dir


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m hpcprof_kit.apps.analyze",
        description="Analyse a run's traces as an MPI job (rank files shared among MPI ranks).",
        epilog="Exit status: 0 when analysed (files that did not load are listed), 2 when "
        "no file loaded.",
    )
    p.add_argument(
        "path", metavar="RUN_DIR_OR_TRACES", nargs="+", help="a run directory, traces/ or files"
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="where tables/, plots/ and summaries/ go (default: $HPCPROF_RUN_DIR)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    return p.parse_args(argv)


def _body(argv: list[str] | None) -> int:
    from hpcprof_kit.cli.traces import print_summary
    from hpcprof_kit.traces.reporting.mpi_summary import run_summary

    args = parse_args(argv)
    out = args.out or current_run_dir()
    if out is None:
        raise SpecError(
            "no --out and no $HPCPROF_RUN_DIR: pass --out DIR for the tables and plots, or "
            "submit the analysis as a job (JobSpec(example='analyze', args=[path]))"
        )
    run = run_summary(args.path, out=out)
    if run is None:  # not MPI rank 0
        return 0
    skipped = {r: m["skipped"] for r, m in run.ranks.items() if m.get("skipped")}
    print_summary(run.summary, skipped, args.json)
    if not args.json:
        print(f"tables in {out}/tables, plots in {out}/plots ({len(run.failures)} files failed)")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_main(_body, argv)


if __name__ == "__main__":
    sys.exit(main())
