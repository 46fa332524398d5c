"""``hpcprof-kit rehearse``: run an Aurora or Polaris job here the way the site would start it.

A stand-in (PBS Pro, Lmod and Cray PALS are modelled; no GPU, no fabric), and every line of its
report says so. Exit status 0 when every stage passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys


def reservations_from(items: list[str]) -> dict[str, dict[str, object]]:
    """``NAME:NODES:HH:MM:SS`` items as the twin's reservations.

    >>> reservations_from(["R123456:2:02:00:00"])
    {'R123456': {'nodes': 2, 'walltime': '02:00:00'}}
    """
    from hpcprof_kit.errors import SpecError

    out: dict[str, dict[str, object]] = {}
    for item in items:
        name, nodes, walltime = (item.split(":", 2) + ["", ""])[:3]
        if not name or not nodes.isdigit() or walltime.count(":") != 2:
            raise SpecError(
                f"--reservation {item!r} is not NAME:NODES:HH:MM:SS; write e.g. R123456:2:02:00:00"
            )
        out[name] = {"nodes": int(nodes), "walltime": walltime}
    return out


def cmd_rehearse(args: argparse.Namespace) -> int:
    from hpcprof_kit.cli.spec_args import _spec
    from hpcprof_kit.rehearsal import rehearse

    if args.ranks_per_node is None:  # a full node of the system by default
        from hpcprof_kit.systems import load_system

        args.ranks_per_node = load_system(args.system).devices_per_node or 2
    spec = _spec(args)
    if spec.account is None and spec.system_record().account_required:
        spec = spec.with_(account="YOUR_PROJECT")
    result = rehearse(
        spec,
        script=args.script,
        interactive=args.interactive,
        modules_missing=tuple(args.missing_module or ()),
        reservations=reservations_from(args.reservation or []),
        keep_twin=args.keep_twin,
    )
    print(result.to_json() if args.json else result.text())
    sys.stdout.flush()
    return 0 if result.ok else 1


def register(sub: argparse._SubParsersAction) -> None:
    from hpcprof_kit.cli.spec_args import _spec_options

    p = sub.add_parser(
        "rehearse",
        help="stand-in: run an Aurora/Polaris job script here as the site would start it",
        description=__doc__,
    )
    _spec_options(p)
    p.set_defaults(system="aurora", ranks_per_node=None)
    p.add_argument(
        "--interactive",
        action="store_true",
        help="start it from inside an interactive job (qsub -I), as a notebook does",
    )
    p.add_argument("--script", help="rehearse this existing script instead of rendering one")
    p.add_argument(
        "--missing-module",
        action="append",
        help="leave this module out of the twin (a site where it was renamed)",
    )
    p.add_argument(
        "--reservation",
        action="append",
        metavar="NAME:NODES:HH:MM:SS",
        help="a reservation queue the twin's PBS knows (e.g. R123456:2:02:00:00)",
    )
    p.add_argument("--keep-twin", action="store_true", help="keep the twin's folder afterwards")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(func=cmd_rehearse)
