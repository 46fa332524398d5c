"""``hpcprof-kit trace RUN_DIR --steps N`` (trace a running job now) and ``hpcprof-kit dynolog``."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "trace",
        help="trace the next N optimizer steps of a running job (on-demand)",
        description="Ask every rank of a running job (started with python -m hpcprof_kit.ondemand) "
        "to record its next N optimizer steps; wait for their answers.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="the job's run directory")
    p.add_argument("--steps", type=int, default=2, help="optimizer steps to record (default 2)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for every rank")
    p.set_defaults(func=run_trace)

    d = subparsers.add_parser(
        "dynolog",
        help="print the Dynolog on-demand recipe for a PBS or Slurm job",
        description="Per-node dynolog daemons, KINETO_USE_DAEMON for the ranks, dyno gputrace per node.",
    )
    d.add_argument("--scheduler", choices=("pbs", "slurm"), required=True)
    d.add_argument("--nodes", type=int, required=True)
    d.add_argument("--ranks-per-node", type=int, required=True)
    d.add_argument("--iterations", type=int, default=5)
    d.set_defaults(func=run_dynolog)


def run_trace(args: argparse.Namespace) -> int:
    from hpcprof_kit.ondemand import request_trace

    answer = request_trace(args.run_dir, steps=args.steps, timeout=args.timeout)
    print(answer.summary())
    return 0 if all(a.get("ok") for a in answer.acks.values()) else 1


def run_dynolog(args: argparse.Namespace) -> int:
    from hpcprof_kit.ondemand import dynolog_recipe

    print(dynolog_recipe(args.scheduler, args.nodes, args.ranks_per_node, args.iterations), end="")
    return 0
