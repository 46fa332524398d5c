"""Plumbing shared by the apps: common flags, the per-rank banner, and the timing JSON."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import KitError, SpecError
from hpcprof_kit.paths import current_run_dir


def add_common_args(parser: argparse.ArgumentParser) -> None:
    """Flags every app understands: device, backend, timeout and where timings go."""
    parser.add_argument("--device", default=None, help="xpu, cuda, mps or cpu (default: detect)")
    parser.add_argument("--backend", default=None, help="collective backend (default: by device)")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="collective timeout")
    parser.add_argument(
        "--timings-dir",
        default=None,
        help="where per-rank timing JSON goes (default: $HPCPROF_RUN_DIR/timings)",
    )
    parser.add_argument("--seed", type=int, default=42, help="random seed (same on every rank)")


def timings_dir(args: argparse.Namespace) -> Path | None:
    """``--timings-dir``, else ``$HPCPROF_RUN_DIR/timings``, else None (nothing written)."""
    if args.timings_dir:
        return Path(args.timings_dir)
    run_dir = current_run_dir()
    return run_dir / "timings" if run_dir else None


def timing_record(
    app: str,
    info,
    local_rank: int,
    dtype: str,
    params: dict[str, Any],
    timings: dict[str, list[float]],
) -> dict[str, Any]:
    """One rank's timing JSON, in the layout of docs/architecture.md "Timing JSON"."""
    return {
        "app": app,
        "rank": info.rank,
        "world_size": info.world_size,
        "local_rank": local_rank,
        "nodes": info.nodes,
        "host": info.host,
        "device": info.device,
        "backend": info.backend,
        "dtype": dtype,
        "params": params,
        "timings": timings,
    }


def write_timings(folder: Path, record: dict[str, Any]) -> Path:
    """Write ``<app>-<rank>-of-<world>.json``; an existing file is never overwritten."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record['app']}-{record['rank']}-of-{record['world_size']}.json"
    with path.open("x") as fh:  # "x": a second run into the same folder fails loudly
        json.dump(record, fh, indent=1)
    return path


def run_main(body: Callable[[list[str] | None], int], argv: list[str] | None) -> int:
    """Run an app's body; the kit's own errors become one clear line and exit code 2."""
    try:
        return body(argv)
    except FileExistsError as exc:
        print(f"error: {exc.filename} exists already and the kit never overwrites a run's "
              "files; run into a fresh folder (a new job, or another --timings-dir or "
              "--trace-dir)", file=sys.stderr)  # fmt: skip
        return 2
    except KitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def flush_print(*parts: object) -> None:
    """Print a whole line in one write and flush, so lines from several ranks do not mix."""
    sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
    sys.stdout.flush()


def add_profiling_args(parser: argparse.ArgumentParser) -> bool:
    """The profiling room's flags plus ``--trace-dir``; False when that room is missing here."""
    parser.add_argument(
        "--trace-dir", default=None, help="where traces go (default: $HPCPROF_RUN_DIR/traces)"
    )
    try:
        from hpcprof_kit.profiling import add_profiler_args
    except ImportError:
        # Keep --profile so asking for it gives a clear error instead of "unknown flag".
        parser.add_argument("--profile", action="store_true", help="(needs hpcprof_kit.profiling)")
        return False
    add_profiler_args(parser)
    parser.add_argument(
        "--capture-steps", default=None, metavar="A-B",
        help="record only steps A..B (from 0): one capture() region for nsys "
        "--capture-range=cudaProfilerApi, unitrace --conditional-collection, or "
        "HPCPROF_CAPTURE=torch (a torch.profiler trace of those steps alone)",
    )  # fmt: skip
    return True


def step_capture(args: argparse.Namespace):
    """The ``--capture-steps`` window: ``.around(step)`` per step, ``.close()`` at the end."""
    steps = getattr(args, "capture_steps", None)
    if steps and getattr(args, "profile", False):
        raise SpecError(
            f"--capture-steps {steps} and --profile both choose the steps to record; use one"
        )
    if not steps:
        return _NoCapture()
    from hpcprof_kit.profiling.ranges import StepCapture

    try:
        return StepCapture(steps)
    except ValueError as exc:
        raise SpecError(str(exc)) from None


def rank_profiler(args: argparse.Namespace, rank: int, world_size: int, local_rank: int):
    """This rank's profiler from the flags: a context manager with ``.step()`` per optimizer step."""
    try:
        from hpcprof_kit import profiling
    except ImportError as exc:
        if getattr(args, "profile", False):
            raise SpecError(
                f"--profile needs hpcprof_kit.profiling, which cannot be imported here ({exc}); "
                "reinstall the kit, or run without --profile"
            ) from None
        return contextlib.nullcontext(_NoSteps())
    return profiling.profiler_from_args(
        args, rank, world_size, current_run_dir(), local_rank, trace_dir=args.trace_dir or None
    )


class _NoCapture:
    """No --capture-steps: every step runs untouched."""

    captured: list[int] = []

    def around(self, step: int):
        return contextlib.nullcontext()

    def close(self) -> None:
        """Nothing was opened."""


class _NoSteps:
    def step(self) -> None:
        """Nothing to record."""


def report_progress(rank: int, done: int, total: int) -> None:
    """Rank 0 tells a waiting ``Job.wait`` how far it is (``progress.json``; no-op outside a job)."""
    if rank != 0:
        return
    try:
        from hpcprof_kit.jobs.progress import report_progress as write_progress
    except ImportError:  # the jobs room is optional for the apps
        return
    write_progress(done, total, "steps")
