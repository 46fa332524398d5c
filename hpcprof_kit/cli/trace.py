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
    d.add_argument("--duration-ms", type=int, help="trace a duration instead of --iterations")
    d.add_argument("--torch-version", help="the ranks' torch (decides KINETO_DAEMON_INIT_DELAY_S)")
    d.add_argument("--job-id", action="store_true", help="filter by $SLURM_JOB_ID (Slurm only)")
    d.add_argument("--pids", type=_pids, default=(), help="comma-separated pids (one-node jobs)")
    d.set_defaults(func=run_dynolog)


def run_trace(args: argparse.Namespace) -> int:
    from hpcprof_kit.ondemand import request_trace

    answer = request_trace(args.run_dir, steps=args.steps, timeout=args.timeout)
    print(answer.summary())
    return 0 if all(a.get("ok") for a in answer.acks.values()) else 1


def _pids(text: str) -> list[int]:
    try:
        return [int(p) for p in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of pids"
        ) from None


def run_dynolog(args: argparse.Namespace) -> int:
    from hpcprof_kit.ondemand import dynolog_recipe

    text = dynolog_recipe(
        args.scheduler,
        args.nodes,
        args.ranks_per_node,
        None if args.duration_ms else args.iterations,
        duration_ms=args.duration_ms,
        torch_version=args.torch_version,
        job_id=True if args.job_id else None,
        pids=args.pids,
    )
    print(text, end="")
    return 0
