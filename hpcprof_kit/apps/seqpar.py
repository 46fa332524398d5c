"""Sequence-parallel mini-app: all-gather -> matmul -> matmul -> reduce-scatter, timed per operation.

Each rank holds ``seq_len / world`` rows of the activations. One step is the MLP block of
sequence + tensor parallelism: gather the full sequence (all_gather), multiply by this rank's
column shard of W1 (matmul_1), multiply by its row shard of W2 (matmul_2), then sum the partial
results over ranks and hand each rank back its own rows (reduce_scatter)::

    mpiexec -n 2 python -m hpcprof_kit.apps.seqpar --seq-len 1536 --hidden 768 --steps 10
    mpiexec -n 2 python -m hpcprof_kit.apps.seqpar --profile --prof-wait 1 --prof-active 2

``--profile`` and the other profiler flags are the same as the train app's: the profiler covers
the timed steps (warm-up steps run before it starts) and steps once per timed step; traces go
to ``$HPCPROF_RUN_DIR/traces/trace-<rank>-of-<world>.json`` (or ``--trace-dir``).

Timings of each operation (seconds, after ``--warmup`` untimed steps) go to
``seqpar-<rank>-of-<world>.json``. ``params.reduce_scatter_impl`` says how the reduce-scatter
ran: ``native`` (the backend's own collective) or ``all_reduce+slice`` where the backend has no
reduce-scatter (older gloo): that moves ``world`` times more data, so its times are not
comparable with a native one.
"""

from __future__ import annotations

import argparse
import time

from hpcprof_kit.apps._common import (
    add_common_args,
    add_profiling_args,
    flush_print,
    rank_profiler,
    report_progress,
    run_main,
    step_capture,
    timing_record,
    timings_dir,
    write_timings,
)
from hpcprof_kit.errors import SpecError

APP = "seqpar"
OPS: tuple[str, ...] = ("all_gather", "matmul_1", "matmul_2", "reduce_scatter", "step")
DTYPES: tuple[str, ...] = ("float32", "bfloat16")


def build_parser() -> argparse.ArgumentParser:
    """The app's flags (see ``python -m hpcprof_kit.apps.seqpar --help``)."""
    p = argparse.ArgumentParser(
        prog="python -m hpcprof_kit.apps.seqpar", description=__doc__.split("\n")[0]
    )
    # Defaults split evenly over 1, 2, 3, 4, 6, 8 and 12 ranks (one Aurora node: 12 tiles):
    # 1536 tokens, and an MLP width of 768 x 4 = 3072.
    p.add_argument("--seq-len", type=int, default=1536, help="full sequence length (all ranks)")
    p.add_argument("--hidden", type=int, default=768, help="hidden size")
    p.add_argument("--ffn-mult", type=int, default=4, help="MLP width = hidden x this")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    add_common_args(p)
    add_profiling_args(p)
    return p


def check_args(args: argparse.Namespace, world_size: int) -> None:
    """SpecError when the sizes cannot be split evenly over the ranks.

    >>> check_args(build_parser().parse_args(["--seq-len", "10"]), 4)
    Traceback (most recent call last):
    ...
    hpcprof_kit.errors.SpecError: --seq-len=10 does not split over 4 ranks; use a multiple of 4 (e.g. 12)
    """
    for flag in ("seq_len", "hidden", "ffn_mult", "steps"):
        if getattr(args, flag) < 1:
            raise SpecError(f"--{flag.replace('_', '-')}={getattr(args, flag)} must be at least 1")
    if args.warmup < 0:
        raise SpecError(f"--warmup={args.warmup} is negative; give 0 or more warm-up steps")
    if args.seq_len % world_size:
        fix = (args.seq_len // world_size + 1) * world_size
        raise SpecError(
            f"--seq-len={args.seq_len} does not split over {world_size} ranks; "
            f"use a multiple of {world_size} (e.g. {fix})"
        )
    if (args.hidden * args.ffn_mult) % world_size:
        raise SpecError(
            f"--hidden x --ffn-mult = {args.hidden * args.ffn_mult} does not split over "
            f"{world_size} ranks; pick a hidden size that is a multiple of {world_size}"
        )


class Collectives:
    """all_gather and reduce_scatter on whole tensors, with an honest fallback for the latter."""

    def __init__(self) -> None:
        import torch.distributed as tdist

        self.tdist = tdist
        # torch >= 2.12 names them *_single; older releases *_into_tensor / *_tensor.
        self._gather = getattr(tdist, "all_gather_single", None) or tdist.all_gather_into_tensor
        self._scatter = getattr(tdist, "reduce_scatter_single", None) or tdist.reduce_scatter_tensor
        self.impl = "native"

    def all_gather(self, out, shard) -> None:
        self._gather(out, shard)

    def reduce_scatter(self, out, full) -> None:
        if self.impl == "native":
            try:
                self._scatter(out, full)
                return
            except RuntimeError:  # the backend lacks reduce-scatter: all-reduce, keep our rows
                self.impl = "all_reduce+slice"
        rank, rows = self.tdist.get_rank(), out.shape[0]
        self.tdist.all_reduce(full)
        out.copy_(full[rank * rows : (rank + 1) * rows])


def main(argv: list[str] | None = None) -> int:
    """Run the timed loop on every rank; 0 on success."""
    return run_main(_seqpar, argv)


def _seqpar(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    import warnings

    import torch

    from hpcprof_kit.dist import distributed

    warnings.filterwarnings("ignore", category=FutureWarning, module="torch.distributed")
    with distributed(backend=args.backend, timeout_s=args.timeout_s, device=args.device) as info:
        flush_print(info.banner())
        check_args(args, info.world_size)
        dev, dtype = torch.device(info.device), getattr(torch, args.dtype)
        world, rows = info.world_size, args.seq_len // info.world_size
        ffn_shard = args.hidden * args.ffn_mult // world
        torch.manual_seed(args.seed + info.rank)
        shard = torch.randn(rows, args.hidden, device=dev, dtype=dtype)
        w1 = torch.randn(args.hidden, ffn_shard, device=dev, dtype=dtype) / args.hidden**0.5
        w2 = torch.randn(ffn_shard, args.hidden, device=dev, dtype=dtype) / ffn_shard**0.5
        full = torch.empty(args.seq_len, args.hidden, device=dev, dtype=dtype)
        out = torch.empty_like(shard)
        comms = Collectives()
        sync = (
            getattr(torch, dev.type).synchronize if dev.type in ("cuda", "xpu") else (lambda: None)
        )
        timings: dict[str, list[float]] = {op: [] for op in OPS}

        def one_step() -> list[float]:
            """One MLP block; the clock before it and after each operation."""
            marks = [time.perf_counter()]
            comms.all_gather(full, shard)
            sync()
            marks.append(time.perf_counter())
            hidden = full @ w1
            sync()
            marks.append(time.perf_counter())
            # This rank's share of every row; the sum over ranks is the answer.
            partial = hidden @ w2
            sync()
            marks.append(time.perf_counter())
            comms.reduce_scatter(out, partial)
            sync()
            marks.append(time.perf_counter())
            return marks

        total = args.warmup + args.steps
        for i in range(args.warmup):
            one_step()
            report_progress(info.rank, i + 1, total)
        window = step_capture(args)  # --capture-steps: only these timed steps are recorded
        with rank_profiler(args, info.rank, info.world_size, info.local_rank) as prof:
            for i in range(args.steps):
                with window.around(i):
                    marks = one_step()
                prof.step()  # once per timed step: the schedule counts these steps
                for op, t0, t1 in zip(OPS[:4], marks, marks[1:], strict=False):
                    timings[op].append(t1 - t0)
                timings["step"].append(marks[-1] - marks[0])
                report_progress(info.rank, args.warmup + i + 1, total)
        window.close()
        if info.rank == 0:
            mean = {op: sum(v) / len(v) * 1e3 for op, v in timings.items()}
            flush_print(
                f"seqpar {args.seq_len}x{args.hidden} {args.dtype} on {world} ranks, "
                + ", ".join(f"{op} {ms:.3f} ms" for op, ms in mean.items())
            )
        params = {
            "seq_len": args.seq_len, "hidden": args.hidden, "ffn_mult": args.ffn_mult,
            "steps": args.steps, "warmup": args.warmup, "rows_per_rank": rows,
            "reduce_scatter_impl": comms.impl,
        }  # fmt: skip
        folder = timings_dir(args)
        if folder is not None:
            write_timings(
                folder, timing_record(APP, info, info.local_rank, args.dtype, params, timings)
            )
        elif info.rank == 0:
            flush_print("timings not written: set HPCPROF_RUN_DIR or pass --timings-dir")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
