"""``hpcprof-kit validate``: run the notebooks under nbval and tabulate the verdicts.

hpcprof-kit validate                                  # every notebooks/*.ipynb, here
hpcprof-kit validate --notebooks notebooks/00_quickstart.ipynb --json
hpcprof-kit validate --system aurora --account MYPROJ # as a batch job on Aurora
hpcprof-kit validate --check-clean                    # what a stored notebook may hold
hpcprof-kit validate --strip notebooks/04_x.ipynb     # clear all but checked outputs
hpcprof-kit validate --answers --seed 14              # the exercises' answer key
hpcprof-kit validate --timing                         # the day's time table
hpcprof-kit validate --timing --measure               # run each notebook headless, time it
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--system", default="local", help="local (here) or a system to submit to")
    parser.add_argument(
        "--notebooks", nargs="+", metavar="PATH", help="notebooks or folders (default: notebooks/)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per notebook")
    parser.add_argument("--cell-timeout", type=float, default=None, help="seconds per cell")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    parser.add_argument("--report", metavar="FILE", help="also write the verdicts as JSON here")
    parser.add_argument("--account", help="project to charge (batch systems)")
    parser.add_argument("--queue", help="queue of the validation job (batch systems)")
    parser.add_argument(
        "--check-clean", action="store_true", help="list what each notebook must not store"
    )
    parser.add_argument(
        "--strip",
        "--fix-clean",
        dest="strip",
        nargs="+",
        metavar="NOTEBOOK",
        help="clear every output but # NBVAL_CHECK_OUTPUT cells, and execution noise",
    )
    parser.add_argument(
        "--answers", action="store_true", help="print the exercises' answer key (instructors)"
    )
    parser.add_argument(
        "--seed", type=int, help="with --answers: also the key of notebook 09's run of SEED"
    )
    parser.add_argument(
        "--timing", action="store_true", help="print the workshop day's time table (instructors)"
    )
    parser.add_argument(
        "--measure", action="store_true", help="with --timing: run each notebook headless first"
    )
    return parser


def _timing(notebooks: list[str] | None, measure: bool) -> int:
    from hpcprof_kit.validate import day

    folder = Path(notebooks[0]) if notebooks else Path("notebooks")
    if measure:
        measured = day.measure(folder)
        print("MACHINE_S = " + json.dumps(measured, indent=4))
        rows = [day.row(p, measured) for p in sorted(folder.glob("[0-9][0-9]_*.ipynb"))]
    else:
        rows = day.day_rows(folder)
    print(day.table_markdown(rows) + "\n\n" + day.day_text(rows))
    return 0 if day.core_minutes(rows) <= day.CORE_LIMIT_MIN else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="run the notebooks under nbval (instructors)",
        description="Run each notebook under nbval in its own process; report per notebook.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def _strip(paths: list[str]) -> int:
    from hpcprof_kit.validate.clean import strip_notebook

    for path in paths:
        print(f"{path}: {'stripped' if strip_notebook(path) else 'already clean'}")
    return 0


def _check_clean(notebooks: list[str] | None) -> int:
    from hpcprof_kit.validate import find_notebooks
    from hpcprof_kit.validate.clean import notebook_problems

    bad = 0
    for path in find_notebooks(notebooks):
        problems = notebook_problems(path)
        bad += bool(problems)
        print(f"{path.name}: {'clean' if not problems else f'{len(problems)} problem(s)'}")
        for problem in problems:
            print(f"  - {problem}")
    return 1 if bad else 0


def run(args: argparse.Namespace) -> int:
    from hpcprof_kit.validate import DOCTOR_FIX, results_table, validate

    if args.strip:
        return _strip(args.strip)
    if args.answers:
        from hpcprof_kit.validate.answers import key_text

        print(key_text(args.seed))
        return 0
    if args.check_clean:
        return _check_clean(args.notebooks)
    if args.timing:
        return _timing(args.notebooks, args.measure)
    # With --json, stdout holds only the JSON; progress lines go to stderr.
    progress = sys.stderr if args.json else sys.stdout

    def on_result(r) -> None:
        where = f" at {r.failing_cell}" if r.failing_cell else ""
        print(f"{r.notebook}: {r.result} in {r.seconds:.1f} s{where}", file=progress, flush=True)

    extra = {k: v for k, v in (("account", args.account), ("queue", args.queue)) if v}
    if args.system != "local":
        from hpcprof_kit.validate.batch import validate_as_job
        from hpcprof_kit.validate.run import find_notebooks

        results = validate_as_job(
            find_notebooks(args.notebooks), system=args.system, timeout=args.timeout,
            on_result=on_result, progress=True, **extra,
        )  # fmt: skip
    else:
        results = validate(
            args.notebooks, timeout=args.timeout, cell_timeout=args.cell_timeout,
            on_result=on_result,
        )  # fmt: skip
    rows = [r.to_dict() for r in results]
    if args.report:
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print()
        print(results_table(results))
    if any(r.result == "no-env" for r in results):
        print(f"\nThe environment cannot run notebooks: {DOCTOR_FIX}", file=sys.stderr)
    return 0 if results and all(r.ok for r in results) else 1
