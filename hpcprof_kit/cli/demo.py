"""``hpcprof-kit demo``: the main job on this machine, end to end."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="run the 2-rank DDP Transformer with a profiler schedule and plot its traces",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from hpcprof_kit.demo import main

    return main()
