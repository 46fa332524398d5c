"""``hpcprof-kit ncu-plan RUN_DIR [--kernel NAME] [--rank R]``: the ncu job for a kernel that
the run's nsys reports (or a kernel summary CSV) name."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "ncu-plan",
        help="render the ncu job for one of an nsys run's top kernels",
        description=(
            "Summarise the kernels of RUN_DIR's nsys reports (or --stats CSV), pick one "
            "(--kernel, default the heaviest) and print the ncu job: -k, --launch-skip, "
            "--launch-count and a --set sized to the walltime. Nothing is submitted."
        ),
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="the nsys run (its spec.json is repeated)")
    p.add_argument("--kernel", help="a kernel name from the summary, its bare name, or regex:...")
    p.add_argument("--rank", type=int, help="the rank to profile (default: the lowest)")
    p.add_argument("--stats", help="a cuda_gpu_kern_sum/gpukernsum CSV instead of the reports")
    p.add_argument("--walltime", help="HH:MM:SS for the ncu job (default: the run's)")
    p.add_argument("--set", dest="ncu_set", help="override the rule: basic|detailed|full|roofline")
    p.add_argument("--launch-count", type=int, default=1)
    p.add_argument("--top", type=int, default=10, help="kernels listed (default 10)")
    p.set_defaults(func=run_ncu_plan)


def run_ncu_plan(args: argparse.Namespace) -> int:
    from hpcprof_kit.jobs import JobSpec
    from hpcprof_kit.nsight.plan import ncu_plan

    spec = None
    if args.stats:
        from pathlib import Path

        spec_file = Path(args.run_dir) / "spec.json"
        spec = JobSpec.from_json(spec_file.read_text()) if spec_file.is_file() else None
    plan = ncu_plan(
        args.stats or args.run_dir,
        kernel=args.kernel,
        rank=args.rank,
        spec=spec,
        walltime=args.walltime,
        ncu_set=args.ncu_set,
        launch_count=args.launch_count,
        top=args.top,
    )
    print(f"# {plan.summary()}")
    print(f"# heaviest kernels on rank {plan.rank}:")
    for row in plan.kernels.itertuples():
        print(f"#   {row.total_ns / 1e6:10.3f} ms  {row.calls:7d}x  {row.name}")
    print(plan.script(), end="")
    return 0
