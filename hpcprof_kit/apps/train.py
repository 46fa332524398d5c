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
runs the original example of the ATPESC guide exactly: ``torch.nn.Transformer(batch_first=True)``
with its defaults (d_model 512, 8 heads, 6 + 6 layers, feed-forward 2048, dropout 0.1), src
``(2048, 1, 512)``, tgt ``(2048, 20, 512)``, batch 32, ``CrossEntropyLoss``, 10 epochs over the
2048 samples, seed 0 (each number's source is next to it in ``SIZES``).

In the trace, ``forward`` and ``backward`` are ``@trace_func`` ranges (the Polaris guide's
decorator) and ``optimizer`` a ``record_function`` block (the ATPESC guide's way).
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

try:
    from hpcprof_kit.profiling.ranges import record_function, trace_func
except ImportError:  # the profiling room is optional for the apps: the phases go unnamed
    from contextlib import nullcontext as record_function

    def trace_func(func):
        return func


APP = "train"
# name: (small default, the ALCF example). The example is the ATPESC 2025 hands-on's
# (https://github.com/argonne-lcf/ATPESC_MachineLearning, "PyTorch profiler", section "Running
# specific examples in this repository"):
#   src = torch.rand((2048, 1, 512)); tgt = torch.rand((2048, 20, 512))
#   DataLoader(dataset, batch_size=32); model = torch.nn.Transformer(batch_first=True)
# so the model sizes are torch.nn.Transformer's defaults.
SIZES: dict[str, tuple[int, int]] = {
    "d_model": (32, 512),  # Transformer default d_model=512 (src/tgt's last dimension, 512)
    "nhead": (4, 8),  # Transformer default nhead=8
    "encoder_layers": (1, 6),  # Transformer default num_encoder_layers=6
    "decoder_layers": (1, 6),  # Transformer default num_decoder_layers=6
    "ffn": (64, 2048),  # Transformer default dim_feedforward=2048
    "src_len": (10, 1),  # src = torch.rand((2048, 1, 512))
    "tgt_len": (20, 20),  # tgt = torch.rand((2048, 20, 512))
    "batch_size": (8, 32),  # DataLoader(..., batch_size=32)
}
DROPOUT = (0.0, 0.1)  # Transformer default dropout=0.1; 0 in the small model
ALCF_SAMPLES = 2048  # src/tgt hold 2048 samples, split over the ranks by the DistributedSampler
ALCF_EPOCHS = 10  # for epoch in range(10)
ALCF_SEED = 0  # torch.manual_seed(0); DistributedSampler(..., seed=0)
SMALL = {"epochs": 2, "steps_per_epoch": 4, "seed": 42}  # the small run's defaults
COMPILE_FORMS = ("none", "ddp", "model")  # --compile-where: eager, around DDP, inside it
BASE_LR = 1e-3  # per rank; multiplied by the world size (the guide's lr=(0.001*SIZE))


def build_parser() -> argparse.ArgumentParser:
    """The app's flags (see ``python -m hpcprof_kit.apps.train --help``)."""
    p = argparse.ArgumentParser(
        prog="python -m hpcprof_kit.apps.train", description=__doc__.split("\n")[0]
    )
    p.add_argument(
        "--epochs", type=int, default=None, help="passes over the dataset (2; 10 --alcf-sizes)"
    )
    p.add_argument(
        "--steps-per-epoch", type=int, default=None,
        help="optimizer steps per epoch (4; with --alcf-sizes: the 2048 samples' batches)",
    )  # fmt: skip
    p.add_argument("--warmup", type=int, default=1, help="first steps left out of the timings")
    p.add_argument(
        "--alcf-sizes", action="store_true",
        help="the ATPESC/ALCF example exactly: Transformer defaults, src (2048,1,512), "
        "tgt (2048,20,512), batch 32, CrossEntropyLoss, 10 epochs, seed 0",
    )  # fmt: skip
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument(
        "--compile-where", choices=COMPILE_FORMS, default=None,
        help="what to compile: 'ddp' = torch.compile(DDP(model)), as the ATPESC guide writes it "
        "(what --compile alone does); 'model' = DDP(torch.compile(model)), the model inside "
        "the wrapper; 'none' = nothing, eager. 'ddp' or 'model' compiles without --compile, so "
        "one sweep of this flag runs the three forms",
    )  # fmt: skip
    p.add_argument(
        "--sync-steps", action="store_true",
        help="synchronize the device after forward, backward and the optimizer (per-phase times "
        "then include the device's work, and the trace loses its asynchronous launches)",
    )  # fmt: skip
    p.add_argument(
        "--ipex",
        action="store_true",
        help="try intel-extension-for-pytorch's optimize (XPU; on the CPU with its CPU build)",
    )
    add_common_args(p)
    p.set_defaults(seed=None)  # 42, or the example's 0 with --alcf-sizes
    add_profiling_args(p)
    return p


def resolve_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Fill the counts left unset: the small run's, or the ALCF example's with ``--alcf-sizes``
    (whose steps per epoch are then the batches of its 2048 samples: ``None`` here).

    >>> args = build_parser().parse_args(["--alcf-sizes"])
    >>> resolved = resolve_defaults(args)
    >>> resolved.epochs, resolved.steps_per_epoch, resolved.seed
    (10, None, 0)
    """
    alcf = args.alcf_sizes
    if args.epochs is None:
        args.epochs = ALCF_EPOCHS if alcf else SMALL["epochs"]
    if args.steps_per_epoch is None and not alcf:
        args.steps_per_epoch = SMALL["steps_per_epoch"]
    if args.seed is None:
        args.seed = ALCF_SEED if alcf else SMALL["seed"]
    return args


def compile_form(args: argparse.Namespace) -> str | None:
    """Where ``torch.compile`` goes: ``"ddp"``, ``"model"``, or None (eager), from ``--compile``
    and ``--compile-where``; SpecError when they contradict each other.

    >>> [compile_form(build_parser().parse_args(a)) for a in
    ...  ([], ["--compile"], ["--compile-where", "model"], ["--compile-where", "none"])]
    [None, 'ddp', 'model', None]
    """
    where = args.compile_where
    if args.compile and where == "none":
        raise SpecError(
            "--compile with --compile-where none asks to compile and not to; drop one of them "
            "(--compile-where ddp or model compiles without --compile)"
        )
    if where in ("ddp", "model"):
        return where
    return "ddp" if args.compile else None


def check_args(args: argparse.Namespace) -> None:
    """SpecError for counts that would train nothing."""
    for flag in ("epochs", "steps_per_epoch"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
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


def device_sync(dev, sync_steps: bool):
    """What the loop calls after each phase: the device's ``synchronize`` with ``--sync-steps``
    on a GPU, else nothing. Without it the host runs ahead of the device, as in real training:
    the phase times are the host's launch times, and only the loss read at each step's end
    (``loss.item()``, as a loop that logs its loss) waits for the device.

    >>> import torch
    >>> device_sync(torch.device("cuda"), sync_steps=False)()   # no call to the device
    """
    import torch

    if sync_steps and dev.type in ("cuda", "xpu"):
        return getattr(torch, dev.type).synchronize
    return lambda: None


@trace_func
def forward(model, criterion, source, target, dev, sync):
    """The batch to the device, the model and the loss: the ``forward`` range of the trace."""
    source, target = source.to(dev), target.to(dev)
    loss = criterion(model(source, target), target)
    sync()
    return loss


@trace_func
def backward(loss, optimizer, sync) -> None:
    """Gradients (DDP all-reduces them here): the ``backward`` range of the trace."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    sync()


def main(argv: list[str] | None = None) -> int:
    """Train for ``--epochs`` x ``--steps-per-epoch`` steps on every rank; 0 on success."""
    return run_main(_train, argv)


def _train(argv: list[str] | None) -> int:
    args = resolve_defaults(build_parser().parse_args(argv))
    check_args(args)
    where = compile_form(args)
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    from hpcprof_kit import device as devmod
    from hpcprof_kit.dist import distributed

    size = sizes(args.alcf_sizes)
    with distributed(backend=args.backend, timeout_s=args.timeout_s, device=args.device) as info:
        flush_print(info.banner())
        torch.manual_seed(args.seed)  # same data and weights on every rank
        dev = torch.device(info.device)
        whole = args.steps_per_epoch is None  # the ALCF example: its 2048 samples, every batch
        samples = (
            ALCF_SAMPLES if whole else args.steps_per_epoch * size["batch_size"] * info.world_size
        )
        src = torch.rand(samples, size["src_len"], size["d_model"])
        tgt = torch.rand(samples, size["tgt_len"], size["d_model"])
        dataset = TensorDataset(src, tgt)
        sampler = DistributedSampler(dataset, num_replicas=info.world_size, rank=info.rank,
                                     shuffle=True, seed=args.seed)  # fmt: skip
        loader = DataLoader(dataset, batch_size=size["batch_size"], sampler=sampler,
                            drop_last=not whole)  # fmt: skip
        model = torch.nn.Transformer(
            d_model=size["d_model"], nhead=size["nhead"], num_encoder_layers=size["encoder_layers"],
            num_decoder_layers=size["decoder_layers"], dim_feedforward=size["ffn"],
            dropout=DROPOUT[1 if args.alcf_sizes else 0], batch_first=True,
        ).to(dev)  # fmt: skip
        criterion = torch.nn.CrossEntropyLoss().to(dev)  # the guide's loss, on the device too
        lr = BASE_LR * info.world_size
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        if args.ipex:
            model, optimizer, note = devmod.optimize(model, optimizer, dev.type, on_cpu=True)
            if info.rank == 0:
                flush_print(f"optimize: {note}")
        # Where torch.compile goes decides what Dynamo sees: around DDP, DDP's own Python
        # breaks the graph; inside it, the model's forward is one graph and DDP stays eager.
        if where == "model":
            model = torch.compile(model)
        model = DDP(model, device_ids=[dev.index] if dev.type in ("cuda", "xpu") else None)
        if where == "ddp":
            model = torch.compile(model)
        if where is not None and info.rank == 0:
            from hpcprof_kit.profiling import compile_note

            compile_note(True, args.profile)
        timings: dict[str, list[float]] = {
            "forward": [],
            "backward": [],
            "optimizer": [],
            "step": [],
        }
        sync = device_sync(dev, args.sync_steps)
        step = 0
        window = step_capture(args)  # --capture-steps: only these steps are recorded
        with rank_profiler(args, info.rank, info.world_size, info.local_rank) as prof:
            for epoch in range(args.epochs):
                sampler.set_epoch(epoch)  # a different shuffle each epoch, same on all ranks
                t_epoch, losses = time.perf_counter(), []
                for source, target in loader:
                    with window.around(step):
                        t0 = time.perf_counter()
                        loss = forward(model, criterion, source, target, dev, sync)
                        t1 = time.perf_counter()
                        backward(loss, optimizer, sync)
                        t2 = time.perf_counter()
                        with record_function("optimizer"):  # a named block, as the ATPESC guide
                            optimizer.step()
                            sync()
                        t3 = time.perf_counter()
                        losses.append(loss.item())  # waits for the device's step
                        t4 = time.perf_counter()
                    prof.step()
                    if step >= args.warmup:
                        for key, dt in zip(
                            timings, (t1 - t0, t2 - t1, t3 - t2, t4 - t0), strict=True
                        ):
                            timings[key].append(dt)
                    step += 1
                    report_progress(info.rank, step, args.epochs * len(loader))
                if info.rank == 0:
                    flush_print(
                        f"epoch {epoch + 1}/{args.epochs}: {len(losses)} steps, "
                        f"loss {sum(losses) / len(losses):.4f}, {time.perf_counter() - t_epoch:.2f} s"
                    )
        window.close()
        folder = timings_dir(args)
        params = {**size, "epochs": args.epochs, "steps_per_epoch": len(loader),
                  "warmup": args.warmup, "steps": step, "lr": lr, "compile": where is not None,
                  "compile_where": where,
                  "loss": "CrossEntropyLoss", "alcf_sizes": args.alcf_sizes,
                  "sync_steps": args.sync_steps}  # fmt: skip
        if folder is not None:
            write_timings(
                folder, timing_record(APP, info, info.local_rank, "float32", params, timings)
            )
        elif info.rank == 0:
            flush_print("timings not written: set HPCPROF_RUN_DIR or pass --timings-dir")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
