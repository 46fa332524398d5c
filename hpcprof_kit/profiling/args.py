"""The apps' profiler flags: ``add_profiler_args(parser)`` and ``profiler_from_args(args, ...)``.

Flags (the schedule ones carry a ``--prof-`` prefix so they never clash with an app's own
``--warmup`` or ``--steps``):

``--profile``, ``--prof-wait 1``, ``--prof-warmup 1``, ``--prof-active 2``, ``--prof-repeat 1``,
``--prof-skip-first 0``, ``--activities auto|cpu|cuda|xpu[,..]``, ``--[no-]record-shapes`` and
``--[no-]profile-memory`` (on, as in the guides), ``--with-stack``, ``--with-flops``,
``--table-rows -1`` (the summary table's ``row_limit``: -1 keeps every row), ``--trace-prefix
trace``, ``--trace-ranks all|first-local|0,1,...``, ``--trace-gzip``.

>>> import argparse
>>> parser = add_profiler_args(argparse.ArgumentParser())
>>> args = parser.parse_args(["--trace-ranks", "0"])
>>> profiler_from_args(args, rank=0, world_size=2).enabled   # no --profile: nothing recorded
False
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from hpcprof_kit.profiling.factory import (
    TABLE_ROWS,
    NoProfiler,
    RankProfiler,
    emit_itt_requested,
    make_profiler,
)
from hpcprof_kit.profiling.schedule import Schedule


def add_profiler_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the profiler flags (in their own argument group) to an app's parser."""
    d = Schedule()
    g = parser.add_argument_group("profiling (torch.profiler)")
    g.add_argument("--profile", action="store_true", help="record traces with torch.profiler")
    g.add_argument(
        "--prof-wait", type=int, default=d.wait, metavar="N", help="idle steps per cycle"
    )
    g.add_argument(
        "--prof-warmup", type=int, default=d.warmup, metavar="N", help="warm-up steps per cycle"
    )
    g.add_argument(
        "--prof-active", type=int, default=d.active, metavar="N", help="recorded steps per cycle"
    )
    g.add_argument(
        "--prof-repeat", type=int, default=d.repeat, metavar="N", help="cycles (0 = until the end)"
    )
    g.add_argument(
        "--prof-skip-first",
        type=int,
        default=d.skip_first,
        metavar="N",
        help="steps skipped before the first cycle",
    )
    g.add_argument("--activities", default="auto", help="auto, or a comma list of cpu,cuda,xpu")
    on = argparse.BooleanOptionalAction  # on by default, as the guides profile
    g.add_argument("--record-shapes", action=on, default=True, help="record input shapes of ops")
    g.add_argument("--profile-memory", action=on, default=True, help="record tensor allocations")
    g.add_argument("--with-stack", action="store_true", help="record Python stacks (costly)")
    g.add_argument("--with-flops", action="store_true", help="estimate FLOPs of matmul/conv ops")
    g.add_argument(
        "--table-rows", type=int, default=TABLE_ROWS, metavar="N",
        help="rows of the per-rank summary table (-1: all, the guide's row_limit=-1)",
    )  # fmt: skip
    g.add_argument(
        "--trace-prefix", default="trace", help="trace file prefix: <prefix>-<rank>-of-<world>.json"
    )
    g.add_argument("--trace-ranks", default="all", help="all, first-local, or ranks such as 0,1")
    g.add_argument("--trace-gzip", action="store_true", help="write .json.gz traces")
    return parser


def schedule_from_args(args: argparse.Namespace) -> Schedule:
    """The Schedule the flags describe (ScheduleError names a bad field)."""
    return Schedule(
        wait=args.prof_wait,
        warmup=args.prof_warmup,
        active=args.prof_active,
        repeat=args.prof_repeat,
        skip_first=args.prof_skip_first,
    )


def profiler_from_args(
    args: argparse.Namespace,
    rank: int,
    world_size: int,
    run_dir: str | os.PathLike[str] | None = None,
    local_rank: int | None = None,
    trace_dir: str | os.PathLike[str] | None = None,
) -> RankProfiler | NoProfiler:
    """The profiler the flags ask for on this rank (a do-nothing object without ``--profile``).

    Traces go to ``trace_dir`` when given (an app's ``--trace-dir``), else ``<run_dir>/traces``
    (``run_dir`` defaults to ``$HPCPROF_RUN_DIR``, else ``.``); tables go beside, to ``tables/``.
    """
    if not getattr(args, "profile", False):
        return NoProfiler(emit_itt=emit_itt_requested())
    if trace_dir is None and run_dir is not None:
        trace_dir = Path(run_dir) / "traces"
    return make_profiler(
        schedule=schedule_from_args(args),
        activities=args.activities,
        record_shapes=args.record_shapes,
        profile_memory=args.profile_memory,
        with_stack=args.with_stack,
        with_flops=args.with_flops,
        trace_dir=trace_dir,
        rank=rank,
        world_size=world_size,
        local_rank=local_rank,
        ranks=args.trace_ranks,
        prefix=args.trace_prefix,
        gzip=args.trace_gzip,
        table_rows=getattr(args, "table_rows", TABLE_ROWS),
    )
