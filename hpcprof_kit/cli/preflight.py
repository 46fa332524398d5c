"""``hpcprof-kit preflight --system aurora|polaris``: the instructor's day-before check, run on
the system's login node. Exit status 1 when any check FAILs."""

from __future__ import annotations

import argparse
import json

from hpcprof_kit.cli import system_help


def cmd_preflight(args: argparse.Namespace) -> int:
    from hpcprof_kit import preflight

    rows = preflight.run_checks(args.system, venv=args.venv, queue=args.queue,
                                account=args.account, filesystems=args.filesystems)  # fmt: skip
    text, code = preflight.report(rows)
    print(json.dumps(preflight.as_dicts(rows), indent=2) if args.json else text)
    return code


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("preflight", help="check a site's modules, kit, tracers and queue as a "
                       "batch job sees them (run on the login node)")  # fmt: skip
    p.add_argument("--system", required=True, help=system_help())
    p.add_argument("--venv", help="the environment jobs activate (default: the one running)")
    p.add_argument("--queue", help="the queue or reservation the class uses")
    p.add_argument("--account", help="the project jobs are charged to")
    p.add_argument("--filesystems", help="e.g. home:flare")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_preflight)
