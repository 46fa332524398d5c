"""``hpcprof-kit bind``: check a CPU-binding list, show a plan, list a system's presets.

Exit codes: ``bind check`` returns 1 when the binding has an error-severity finding (reserved,
shared, ccl, split, socket, numa), so a job script can refuse a bad list; warnings and info
(sibling, workers, unbound) return 0. ``bind plan`` shows any plan, bad ones included (the
exercise needs them), and returns 0. Bad input (a list that does not parse, a CPU beyond the
node, more ranks than devices) returns 2 with the reason.

    hpcprof-kit bind check --system aurora --cpu-bind list:0-7:8-15 --json
    hpcprof-kit bind plan --system polaris --ranks-per-node 4 --preset common-mistake
    hpcprof-kit bind presets --system aurora
"""

from __future__ import annotations

import argparse
import json

from hpcprof_kit.cli import system_help


def register(subparsers) -> None:
    """Add ``bind check``, ``bind plan`` and ``bind presets``."""
    bind = subparsers.add_parser("bind", help="check, plan and list CPU/GPU bindings")
    sub = bind.add_subparsers(dest="bind_command", metavar="ACTION", required=True)

    check = sub.add_parser("check", help="check a --cpu-bind list against a system's node")
    check.add_argument("--system", required=True, help=system_help())
    check.add_argument("--cpu-bind", required=True, help="list:4-7:8-11, depth:8, user:1,0, ...")
    check.add_argument("--ranks-per-node", type=int, default=None)
    check.add_argument("--workers", type=int, default=0, help="DataLoader workers per rank")
    check.add_argument("--json", action="store_true", help="print {'findings': [...]}")
    check.set_defaults(func=_check)

    plan = sub.add_parser("plan", help="show the binding plan for a system and rank count")
    plan.add_argument("--system", required=True)
    plan.add_argument("--ranks-per-node", type=int, required=True)
    plan.add_argument("--preset", default=None, help="a preset name, 'auto', or a list")
    plan.add_argument("--launcher", default=None, choices=("pals", "hydra", "srun"))
    plan.add_argument("--workers", type=int, default=0, help="DataLoader workers per rank")
    plan.add_argument("--json", action="store_true")
    plan.set_defaults(func=_plan)

    presets = sub.add_parser("presets", help="list a system's named binding plans")
    presets.add_argument("--system", required=True)
    presets.add_argument("--json", action="store_true")
    presets.set_defaults(func=_presets)


def _check(args: argparse.Namespace) -> int:
    from hpcprof_kit.affinity import plan_for

    plan = plan_for(
        args.system, args.ranks_per_node, args.cpu_bind, dataloader_workers=args.workers
    )
    if args.json:
        print(json.dumps({"findings": [f.to_dict() for f in plan.findings]}, indent=2))
    elif plan.findings:
        for f in plan.findings:
            print(f"rank {f.rank:>3}  {f.severity:<7}  {f.kind:<8}  {f.message}")
    else:
        print(f"no findings: {plan.cpu_bind} suits {plan.ranks_per_node} ranks on {plan.system}")
    return 1 if plan.errors else 0


def _plan(args: argparse.Namespace) -> int:
    from hpcprof_kit.affinity import plan_for

    plan = plan_for(args.system, args.ranks_per_node, args.preset, dataloader_workers=args.workers)
    if args.json:
        data = plan.to_json()
        if args.launcher:
            data["cpu_bind"] = " ".join(plan.launcher_args(args.launcher))
        print(json.dumps(data, indent=2))
        return 0
    print(f"# {plan.system} '{plan.preset}': {plan.title}")
    print(" ".join(plan.launcher_args(args.launcher)))
    for key, value in plan.env().items():
        print(f"export {key}={value}")
    print(plan.table().to_string(index=False))
    for f in plan.findings:
        print(f"[{f.severity}] {f.kind}: {f.message}")
    return 0


def _presets(args: argparse.Namespace) -> int:
    from hpcprof_kit.affinity import preset_table

    rows = preset_table(args.system)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        counts = ",".join(str(n) for n in row["ranks_per_node"]) or "any"
        bad = ",".join(row["known_problems"]) or "-"
        print(f"{row['name']:<18} ranks/node {counts:<8} problems {bad:<16} {row['title']}")
    return 0
