"""``hpcprof-kit schedule``: show which steps a profiler schedule records, before running it.

>>> from hpcprof_kit.cli import main
>>> main(["schedule", "--wait", "0", "--warmup", "1", "--active", "1", "--steps", "2", "--json"])
[{"step": 0, "state": "warmup"}, {"step": 1, "state": "record_and_save"}]
0
"""

from __future__ import annotations

import argparse
import json

from hpcprof_kit.profiling.schedule import format_schedule, schedule_steps


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "schedule",
        help="show each step's profiler state (idle, warmup, record, record_and_save)",
        description="Explain a torch.profiler schedule: the state of every step and its trace.",
    )
    p.add_argument("--wait", type=int, default=1, help="idle steps per cycle (default 1)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up steps per cycle (default 1)")
    p.add_argument("--active", type=int, default=2, help="recorded steps per cycle (default 2)")
    p.add_argument("--repeat", type=int, default=1, help="cycles; 0 = until the end (default 1)")
    p.add_argument("--skip-first", type=int, default=0, help="steps skipped first (default 0)")
    p.add_argument("--steps", type=int, default=8, help="loop length to show (default 8)")
    p.add_argument("--json", action="store_true", help='print [{"step": n, "state": ...}, ...]')
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rows = schedule_steps(
        wait=args.wait,
        warmup=args.warmup,
        active=args.active,
        repeat=args.repeat,
        skip_first=args.skip_first,
        steps=args.steps,
    )
    if args.json:
        print(json.dumps([{"step": r["step"], "state": r["state"]} for r in rows]))
    else:
        print(format_schedule(rows))
    return 0
