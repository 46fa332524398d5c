"""DDP training of a small ``torch.nn.Transformer`` on synthetic data (ALCF's "hello DDP", done right).

Start one process per rank with the launcher; ranks, device and backend come from
:mod:`hpcprof_kit.dist`::

    mpiexec -n 2 python -m hpcprof_kit.apps.train --epochs 2 --steps-per-epoch 4
    mpiexec -n 2 python -m hpcprof_kit.apps.train --profile --prof-wait 1 --prof-active 2

What it honours that the old material did not: ``--epochs`` and ``--steps-per-epoch`` (the
dataset is sized so every rank gets exactly that many steps), the learning rate scaled by the
world size, a ``DistributedSampler`` re-shuffled each epoch, and per-rank timings written as JSON
(``train-<rank>-of-<world>.json``: forward, backward, optimizer and step seconds, warm-up
steps excluded). Default sizes are small so 2 CPU ranks finish in seconds; ``--alcf-sizes``
restores the sizes of the original example (d_model 512, 16 heads, 12 encoder layers).
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
    timing_record,
    timings_dir,
    write_timings,
)
from hpcprof_kit.errors import SpecError

APP = "train"
# name: (small default, ALCF example size)
SIZES: dict[str, tuple[int, int]] = {
    "d_model": (32, 512),
    "nhead": (4, 16),
    "encoder_layers": (1, 12),
    "decoder_layers": (1, 6),
    "ffn": (64, 2048),
    "src_len": (10, 10),
    "tgt_len": (20, 20),
    "batch_size": (8, 32),
}
BASE_LR = 1e-3  # per rank; multiplied by the world size (linear scaling rule)


def build_parser() -> argparse.ArgumentParser:
    """The app's flags (see ``python -m hpcprof_kit.apps.train --help``)."""
    p = argparse.ArgumentParser(
        prog="python -m hpcprof_kit.apps.train", description=__doc__.split("\n")[0]
    )
    p.add_argument("--epochs", type=int, default=2, help="passes over the dataset")
    p.add_argument("--steps-per-epoch", type=int, default=4, help="optimizer steps per epoch")
    p.add_argument("--warmup", type=int, default=1, help="first steps left out of the timings")
    p.add_argument(
        "--alcf-sizes", action="store_true", help="model/batch sizes of the ALCF example"
    )
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--ipex", action="store_true", help="try intel-extension-for-pytorch on XPU")
    add_common_args(p)
    add_profiling_args(p)
    return p


def check_args(args: argparse.Namespace) -> None:
    """SpecError for counts that would train nothing."""
    for flag in ("epochs", "steps_per_epoch"):
        if getattr(args, flag) < 1:
            raise SpecError(
                f"--{flag.replace('_', '-')}={getattr(args, flag)} trains nothing; "
                "give a whole number of at least 1"
            )
    if args.warmup < 0:
        raise SpecError(f"--warmup={args.warmup} is negative; give 0 or more warm-up steps")


def sizes(alcf: bool) -> dict[str, int]:
    """The model and batch sizes in use.

    >>> sizes(False)["d_model"], sizes(True)["d_model"]
    (32, 512)
    """
    return {name: pair[1] if alcf else pair[0] for name, pair in SIZES.items()}


def main(argv: list[str] | None = None) -> int:
    """Train for ``--epochs`` x ``--steps-per-epoch`` steps on every rank; 0 on success."""
    return run_main(_train, argv)


def _train(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    check_args(args)
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import record_function
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    from hpcprof_kit import device as devmod
    from hpcprof_kit.dist import distributed

    size = sizes(args.alcf_sizes)
    with distributed(backend=args.backend, timeout_s=args.timeout_s, device=args.device) as info:
        flush_print(info.banner())
        torch.manual_seed(args.seed)  # same data and weights on every rank
        dev = torch.device(info.device)
        samples = args.steps_per_epoch * size["batch_size"] * info.world_size
        src = torch.rand(samples, size["src_len"], size["d_model"])
        tgt = torch.rand(samples, size["tgt_len"], size["d_model"])
        dataset = TensorDataset(src, tgt)
        sampler = DistributedSampler(dataset, num_replicas=info.world_size, rank=info.rank,
                                     shuffle=True, seed=args.seed)  # fmt: skip
        loader = DataLoader(dataset, batch_size=size["batch_size"], sampler=sampler, drop_last=True)
        model = torch.nn.Transformer(
            d_model=size["d_model"], nhead=size["nhead"], num_encoder_layers=size["encoder_layers"],
            num_decoder_layers=size["decoder_layers"], dim_feedforward=size["ffn"],
            dropout=0.0, batch_first=True,
        ).to(dev)  # fmt: skip
        lr = BASE_LR * info.world_size
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        if args.ipex:
            model, optimizer, note = devmod.optimize(model, optimizer, dev.type)
            if info.rank == 0:
                flush_print(f"optimize: {note}")
        model = DDP(model, device_ids=[dev.index] if dev.type in ("cuda", "xpu") else None)
        if args.compile:
            model = torch.compile(model)
            if info.rank == 0:
                from hpcprof_kit.profiling import compile_note

                compile_note(args.compile, args.profile)
        loss_fn = torch.nn.MSELoss()
        timings: dict[str, list[float]] = {
            "forward": [],
            "backward": [],
            "optimizer": [],
            "step": [],
        }
        sync = (
            getattr(torch, dev.type).synchronize if dev.type in ("cuda", "xpu") else (lambda: None)
        )
        step = 0
        with rank_profiler(args, info.rank, info.world_size, info.local_rank) as prof:
            for epoch in range(args.epochs):
                sampler.set_epoch(epoch)  # a different shuffle each epoch, same on all ranks
                t_epoch, losses = time.perf_counter(), []
                for source, target in loader:
                    t0 = time.perf_counter()
                    with record_function("forward"):  # the phases, named in the trace
                        source, target = source.to(dev), target.to(dev)
                        out = model(source, target)
                        loss = loss_fn(out, target)
                        sync()
                    t1 = time.perf_counter()
                    with record_function("backward"):
                        optimizer.zero_grad(set_to_none=True)
                        loss.backward()  # DDP all-reduces gradients here
                        sync()
                    t2 = time.perf_counter()
                    with record_function("optimizer"):
                        optimizer.step()
                        sync()
                    t3 = time.perf_counter()
                    prof.step()
                    if step >= args.warmup:
                        for key, dt in zip(
                            timings, (t1 - t0, t2 - t1, t3 - t2, t3 - t0), strict=True
                        ):
                            timings[key].append(dt)
                    losses.append(loss.item())
                    step += 1
                    report_progress(info.rank, step, args.epochs * args.steps_per_epoch)
                if info.rank == 0:
                    flush_print(
                        f"epoch {epoch + 1}/{args.epochs}: {len(losses)} steps, "
                        f"loss {sum(losses) / len(losses):.4f}, {time.perf_counter() - t_epoch:.2f} s"
                    )
        folder = timings_dir(args)
        params = {**size, "epochs": args.epochs, "steps_per_epoch": args.steps_per_epoch,
                  "warmup": args.warmup, "steps": step, "lr": lr, "compile": args.compile}  # fmt: skip
        if folder is not None:
            write_timings(
                folder, timing_record(APP, info, info.local_rank, "float32", params, timings)
            )
        elif info.rank == 0:
            flush_print("timings not written: set HPCPROF_RUN_DIR or pass --timings-dir")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
