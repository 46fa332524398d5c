"""``hpcprof-kit doctor``: is this environment ready for the notebooks and jobs?"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check Python, torch, device, MPI, schedulers, Jupyter")
    p.add_argument("--json", action="store_true", help="one JSON object per check")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from hpcprof_kit.doctor import report

    text, code = report(as_json=args.json)
    print(text)
    return code
