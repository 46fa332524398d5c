"""A small DDP training loop that really has the problems you ask for, to see what the run
report says about each (``traces report``)::

    mpiexec -n 2 python -m hpcprof_kit.apps.pathologies --problem data_loading,straggler \\
        --profile --prof-wait 0 --prof-warmup 1 --prof-active 6

Problems (``--problem``, comma-separated), each made by real work, not by editing a trace:

- ``data_loading``: the DataLoader's collate takes ``--loader-ms`` per batch (slow I/O), with
  the training waiting for it (``num_workers=0``);
- ``straggler``: rank ``--slow-rank`` computes ``--slow-ms`` more in steps ``--slow-steps``
  only (an intermittent straggler; the others wait in the all-reduce);
- ``synchronize_in_step``: ``loss.item()`` between forward and backward, then ``--log-ms``
  of host-side work (the device waits on a GPU);
- ``launch_bound``: ``--tiny-ops`` tiny in-place ops a step, one launch each (on the CPU,
  one dispatch each: the step's time goes to dispatching, not to arithmetic);
- ``allocator_churn``: a ``--churn-mb`` buffer allocated, written and freed each step, with
  ``empty_cache()`` on a GPU (the caching allocator bypassed; on the CPU each is a fresh
  ``mmap`` whose pages fault in again);
- ``periodic_save``: every ``--save-every``-th step (steps K, 2K, ...; 3 and 6 by default),
  each rank saves the model with ``torch.save(model.state_dict(), ...)`` inside the step, as a
  checkpoint would. The model carries a frozen ``--save-mb`` table (a fine-tuned model's
  frozen part: in the state dict, not in the gradients' all-reduce), so the save is tens of ms
  on the CPU; on a device it copies the state dict to pageable host memory, then writes the
  file. The files go to a temporary folder inside the run directory, removed at the end;
- ``host_stall``: rank ``--stall-rank`` stalls its host for ``--stall-ms`` in the middle of
  forward in step ``--stall-step`` only, by work no traced op covers: cyclic garbage made and
  collected by ``gc.collect()``, as a garbage-collector pause (the others wait for it in the
  all-reduce);
- ``rotating_straggler``: uneven batches that rotate among the ranks: in step ``s`` rank
  ``s mod world`` gets a batch ``--rotate-factor`` times larger, so its forward and backward
  compute that much longer and the others wait in the all-reduce; the slow rank changes every
  step.

On a GPU (or XPU) three more, which need a device:

- ``pageable_copy``: each step copies a ``--copy-mb`` batch from pageable host memory (the fix:
  ``pin_memory()`` and ``non_blocking=True``);
- ``sync_copy``: each step copies ``--copy-mb`` of results back to the host with ``.cpu()``,
  which waits for the device;
- ``no_tensor_cores``: the step's matrix work in float32 with TF32 off, where the fixed run
  uses bfloat16 (the same products, on the tensor cores or XMX).

On a device the step's compute is matrix products queued on it (their number measured once
to last ``--work-ms``), not a clock on the host, so the device has work and the host runs
ahead as in real training. Either way the compute scales with the batch's rows (16 a batch),
as a model's does.

``--problem none`` (or nothing) trains without any: the fixed run of a sweep such as
``JobSpec(example="pathologies").sweep(**{"--problem": ["data_loading", "none"]})``. Every
rank writes its step times (``timings/pathologies-<rank>-of-<world>.json``, the first step
left out as the warm-up), so a sweep compares a problem with its fix.

On the CPU the report names the first five problems but ``synchronize_in_step``: there
``.item()`` waits for no device, and the report lists that kind as not applicable.
``allocator_churn`` is seen there in the ``[memory]`` events, which the profiler records by
default (``--profile-memory``); without them the report says that rule could not run. The three
patterns across steps and ranks show in ``traces.step_breakdown`` per rank and step:
``periodic_save``'s steps are slow on every rank, mostly ``idle`` (no op covers the write);
``host_stall``'s rank and step have ``--stall-ms`` of ``idle`` while the other ranks wait in
``exposed_comm``; with ``rotating_straggler`` the rank with the most work (``wall`` less
``exposed_comm``) is ``step mod world``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import shutil
import tempfile
import time
from pathlib import Path

from hpcprof_kit.apps._common import (
    add_common_args,
    add_profiling_args,
    flush_print,
    rank_profiler,
    run_main,
    timing_record,
    timings_dir,
    write_timings,
)
from hpcprof_kit.errors import SpecError
from hpcprof_kit.paths import current_run_dir

APP = "pathologies"
PROBLEMS = ("data_loading", "straggler", "synchronize_in_step", "launch_bound",
            "allocator_churn", "periodic_save", "host_stall", "rotating_straggler",
            "pageable_copy", "sync_copy", "no_tensor_cores")  # fmt: skip
DEVICE_ONLY = ("pageable_copy", "sync_copy", "no_tensor_cores")  # nothing to see on a CPU
NONE = "none"  # no problem: the fixed run
BATCH = 16  # rows a batch (rotating_straggler: the slow rank's batch is larger)
FEATURES = 256

try:
    from hpcprof_kit.profiling.ranges import record_function
except ImportError:  # the profiling room is optional for the apps: the ranges go unnamed

    def record_function(name: str):
        return contextlib.nullcontext()


def build_parser() -> argparse.ArgumentParser:
    """The app's flags (see ``python -m hpcprof_kit.apps.pathologies --help``)."""
    p = argparse.ArgumentParser(prog="python -m hpcprof_kit.apps.pathologies",
                                description=__doc__.split("\n")[0])  # fmt: skip
    p.add_argument("--problem", default="", help=f"comma-separated, of {', '.join(PROBLEMS)}")
    p.add_argument("--steps", type=int, default=8, help="training steps")
    p.add_argument("--work-ms", type=float, default=20.0, help="each step's compute, ms")
    p.add_argument("--loader-ms", type=float, default=15.0, help="data_loading: ms per batch")
    p.add_argument("--slow-rank", type=int, default=None, help="straggler: rank (default last)")
    p.add_argument("--slow-steps", default="3,5", help="straggler: steps (from 0)")
    p.add_argument("--slow-ms", type=float, default=15.0, help="straggler: extra compute, ms")
    p.add_argument("--log-ms", type=float, default=8.0, help="synchronize_in_step: host ms")
    p.add_argument("--tiny-ops", type=int, default=1000, help="launch_bound: tiny ops a step")
    p.add_argument("--churn-mb", type=int, default=64, help="allocator_churn: MiB a step")
    p.add_argument("--copy-mb", type=int, default=64, help="pageable_copy, sync_copy: MiB a step")
    p.add_argument("--save-every", type=int, default=3,
                   help="periodic_save: save in steps K, 2K, ... (from 0)")  # fmt: skip
    p.add_argument("--save-mb", type=int, default=64,
                   help="periodic_save: MiB of frozen weights in the saved state")  # fmt: skip
    p.add_argument("--stall-rank", type=int, default=None, help="host_stall: rank (default last)")
    p.add_argument("--stall-step", type=int, default=4, help="host_stall: step (from 0)")
    p.add_argument("--stall-ms", type=float, default=60.0, help="host_stall: ms of GC work")
    p.add_argument("--rotate-factor", type=float, default=1.7,
                   help="rotating_straggler: the slow rank's batch, times the others'")  # fmt: skip
    add_common_args(p)
    add_profiling_args(p)
    return p


def problems(text: str) -> set[str]:
    """The ``--problem`` list, checked (``none``: no problem).

    >>> sorted(problems("straggler,data_loading")), problems("none")
    (['data_loading', 'straggler'], set())
    """
    asked = {p.strip() for p in text.split(",") if p.strip()} - {NONE}
    unknown = sorted(asked - set(PROBLEMS))
    if unknown:
        raise SpecError(f"--problem {text!r}: {', '.join(unknown)} is not a problem this app "
                        f"makes; pick from {', '.join(PROBLEMS)} (or {NONE})")  # fmt: skip
    return asked


def compute(ms: float, a, b) -> None:
    """Real matrix work for ``ms`` milliseconds of this host's time (how long, not how much:
    steady on any host)."""
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        a @ b


def check_flags(args: argparse.Namespace, asked: set[str]) -> None:
    """The flags' limits that need no process group: a SpecError naming the flag, its value,
    the limit and the fix."""
    if args.steps < 1:
        raise SpecError(f"--steps {args.steps}: at least 1 step; use --steps 8")
    for flag, value in (("--churn-mb", args.churn_mb), ("--tiny-ops", args.tiny_ops),
                        ("--copy-mb", args.copy_mb), ("--save-every", args.save_every),
                        ("--save-mb", args.save_mb)):  # fmt: skip
        if value < 1:
            raise SpecError(f"{flag} {value}: at least 1; use the default ({flag} "
                            f"{default(flag)})")  # fmt: skip
    if not args.stall_ms > 0:
        raise SpecError(f"--stall-ms {args.stall_ms:g}: more than 0 ms; use the default "
                        f"(--stall-ms {default('--stall-ms'):g})")  # fmt: skip
    if not round(BATCH * args.rotate_factor) > BATCH:
        raise SpecError(f"--rotate-factor {args.rotate_factor:g}: the slow rank's batch, that "
                        f"many times the others' {BATCH} rows, must be larger: at least 1.04 "
                        f"({BATCH + 1} rows); use the default "
                        f"(--rotate-factor {default('--rotate-factor'):g})")  # fmt: skip
    if "periodic_save" in asked and args.save_every >= args.steps:
        raise SpecError(f"--save-every {args.save_every}: at most --steps - 1 "
                        f"({args.steps - 1}), else no step saves (steps K, 2K, ... from 0); "
                        f"use a smaller --save-every or more --steps")  # fmt: skip
    if "host_stall" in asked and not 0 <= args.stall_step < args.steps:
        raise SpecError(f"--stall-step {args.stall_step}: one of the steps 0 to "
                        f"{args.steps - 1} (--steps {args.steps}); use a step in that range")  # fmt: skip


def default(flag: str):
    """A flag's default value."""
    return build_parser().get_default(flag[2:].replace("-", "_"))


def batch_sizes(steps: int, rank: int, world: int, factor: float | None) -> list[int]:
    """This rank's batch sizes, step by step: ``BATCH`` rows, or with uneven batches rotating
    among the ranks (``factor``) ``factor`` times that in the steps ``s`` with
    ``s mod world == rank``.

    >>> batch_sizes(4, 1, 2, 1.7), batch_sizes(2, 0, 2, None)
    ([16, 27, 16, 27], [16, 16])
    """
    big = round(BATCH * factor) if factor else BATCH
    return [big if s % world == rank else BATCH for s in range(steps)]


def make_model(torch, frozen_mb: int):
    """The trained model, a linear layer; with ``frozen_mb`` it carries a frozen table of that
    many MiB too (a fine-tuned model's frozen part: in its state dict, not in the gradients)."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(FEATURES, FEATURES)
            if frozen_mb:
                rows = (frozen_mb << 20) // (FEATURES * 4)  # float32
                self.frozen = torch.nn.Embedding(rows, FEATURES)
                self.frozen.weight.requires_grad_(False)

        def forward(self, x):
            return self.linear(x)

    return Net() if frozen_mb else torch.nn.Linear(FEATURES, FEATURES)


def gc_stall(ms: float) -> int:
    """Stall this host ``ms`` by garbage collection, work no traced op covers: cyclic garbage
    made and collected (``gc.collect(1)``) until ``ms`` have passed; returns how many
    collections ran. A full collection walks every object of the process, torch's own
    included (100 ms or more), too coarse to size a pause by: the automatic collector is off
    meanwhile, and the young generations hold just the garbage made here, a fraction of a ms
    each."""
    end = time.perf_counter() + ms / 1e3
    collections = 0
    automatic = gc.isenabled()
    gc.disable()
    try:
        while time.perf_counter() < end:
            junk = [[] for _ in range(1000)]
            for item in junk:
                item.append(item)  # a cycle: only the collector frees it
            del junk
            gc.collect(1)
            collections += 1
    finally:
        if automatic:
            gc.enable()
    return collections


@contextlib.contextmanager
def save_folder(rank: int, on: bool):
    """periodic_save's folder for this rank's checkpoints (None when ``on`` is False): a fresh
    temporary folder inside the run directory (else the system's), removed at the end."""
    if not on:
        yield None
        return
    run_dir = current_run_dir()
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"pathologies-saves-{rank}-", dir=run_dir))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Work:
    """The step's matrix work: on the CPU by the clock (:func:`compute`); on a device, a number
    of products queued on it, measured once to last about ``ms`` there, so the host runs ahead
    and the device computes, as in training."""

    def __init__(self, torch, dev, fp32: bool = False):
        self.dev = dev
        if dev.type == "cpu":
            self.a, self.b = torch.rand(128, 128), torch.rand(128, 128)
            return
        # bfloat16 runs on the tensor cores (XMX on Intel); float32 with TF32 off does not
        dtype = torch.float32 if fp32 else torch.bfloat16
        self.a = torch.rand(4096, 4096, device=dev, dtype=torch.bfloat16)
        self.b = torch.rand(4096, 4096, device=dev, dtype=torch.bfloat16)
        self.ms_each = self._measure(torch)  # measured in bfloat16: the same count in fp32
        self.a, self.b = self.a.to(dtype), self.b.to(dtype)  # is the same work, slower

    def _measure(self, torch) -> float:
        sync = getattr(torch, self.dev.type).synchronize
        self.a @ self.b
        sync()
        t0 = time.perf_counter()
        for _ in range(20):
            self.a @ self.b
        sync()
        return (time.perf_counter() - t0) / 20 * 1e3

    def __call__(self, ms: float) -> None:
        if self.dev.type == "cpu":
            compute(ms, self.a, self.b)
            return
        for _ in range(max(1, round(ms / self.ms_each))):
            self.a @ self.b


def main(argv: list[str] | None = None) -> int:
    """Train ``--steps`` steps with the problems asked for; 0 on success."""
    return run_main(_train, argv)


def _train(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    asked = problems(args.problem)
    check_flags(args, asked)
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset

    from hpcprof_kit.dist import distributed

    if "no_tensor_cores" in asked:
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 stays on the SIMT cores
        torch.backends.cudnn.allow_tf32 = False
    slow_steps = {int(s) for s in args.slow_steps.split(",") if s.strip()}

    def collate(batch):
        if "data_loading" in asked:
            time.sleep(args.loader_ms / 1e3)  # the batch's files, read slowly
        return torch.stack([b[0] for b in batch]), torch.stack([b[1] for b in batch])

    with distributed(backend=args.backend, timeout_s=args.timeout_s, device=args.device) as info:
        flush_print(info.banner())
        torch.manual_seed(args.seed)
        dev = torch.device(info.device)
        if dev.type == "cpu" and asked & set(DEVICE_ONLY):
            raise SpecError(
                f"--problem {','.join(sorted(asked & set(DEVICE_ONLY)))}: needs a GPU or XPU "
                "(a copy to the device, or its tensor cores); this run is on the CPU; pick "
                f"from {', '.join(p for p in PROBLEMS if p not in DEVICE_ONLY)} here"
            )
        slow_rank = info.world_size - 1 if args.slow_rank is None else args.slow_rank
        stall_rank = info.world_size - 1 if args.stall_rank is None else args.stall_rank
        if "host_stall" in asked and not 0 <= stall_rank < info.world_size:
            raise SpecError(f"--stall-rank {stall_rank}: this run has ranks 0 to "
                            f"{info.world_size - 1}; use one of them (default: the last)")  # fmt: skip
        stall_step = args.stall_step if "host_stall" in asked and info.rank == stall_rank else None
        # each batch's rows: BATCH, or with uneven batches a larger one on a rotating rank
        sizes = batch_sizes(args.steps, info.rank, info.world_size,
                            args.rotate_factor if "rotating_straggler" in asked else None)  # fmt: skip
        ends = [sum(sizes[: s + 1]) for s in range(args.steps)]
        data = TensorDataset(torch.rand(ends[-1], FEATURES), torch.rand(ends[-1], FEATURES))
        batches = [list(range(end - n, end)) for n, end in zip(sizes, ends, strict=True)]
        loader = DataLoader(data, batch_sampler=batches, collate_fn=collate, num_workers=0)
        model = DDP(make_model(torch, args.save_mb if "periodic_save" in asked else 0).to(dev))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        work = Work(torch, dev, fp32="no_tensor_cores" in asked)
        host_a, host_b = torch.rand(128, 128), torch.rand(128, 128)  # host-side work
        # on a device the model runs in bfloat16 autocast, unless the problem is its absence
        autocast = dev.type != "cpu" and "no_tensor_cores" not in asked
        copy_in = torch.rand(args.copy_mb << 18) if "pageable_copy" in asked else None
        copy_out = (torch.rand(args.copy_mb << 18, device=dev) if "sync_copy" in asked
                    else None)  # fmt: skip
        timings: dict[str, list[float]] = {"forward": [], "backward": [], "step": []}
        profiler = rank_profiler(args, info.rank, info.world_size, info.local_rank)
        with profiler as prof, save_folder(info.rank, "periodic_save" in asked) as saves:
            start = time.perf_counter()
            for step, (x, y) in enumerate(loader):  # the batch's wait is in its step
                # a plain copy, as most loops do: on a GPU the host waits for it, which paces
                # the host to the device once a step
                x, y = x.to(dev), y.to(dev)
                if copy_in is not None:
                    copy_in.to(dev)  # pageable: the host waits while the driver stages it
                if "launch_bound" in asked:  # where the device has drained: each op is paced
                    t = torch.ones(8, device=dev)  # by the host's launch of it
                    for _ in range(args.tiny_ops):
                        t.mul_(1.0001)  # one tiny kernel per op
                rows = len(x) / BATCH  # the step's compute scales with its batch
                with record_function("forward"):
                    t0 = time.perf_counter()
                    if step == stall_step:  # a GC pause in the middle of forward
                        work(args.work_ms / 4 * rows)
                        gc_stall(args.stall_ms)
                        work(args.work_ms / 4 * rows)
                    else:
                        work(args.work_ms / 2 * rows)
                    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast):
                        loss = torch.nn.functional.mse_loss(model(x).float(), y)
                    forward = time.perf_counter() - t0
                if "synchronize_in_step" in asked:
                    value = loss.item()  # waits for the device
                    with record_function("log_metrics"):
                        compute(args.log_ms, host_a, host_b)  # host-side work with the value
                    del value
                if copy_out is not None:
                    copy_out.cpu()  # the results brought back: waits for the device
                if "straggler" in asked and info.rank == slow_rank and step in slow_steps:
                    with record_function("slow_rank_extra_work"):
                        work(args.slow_ms)
                if "allocator_churn" in asked:
                    buf = torch.ones(args.churn_mb << 20, dtype=torch.uint8, device=dev)
                    del buf  # a scratch buffer made, written and dropped every step
                    if dev.type == "cuda":
                        torch.cuda.empty_cache()  # the next allocation calls cudaMalloc
                    elif dev.type == "xpu":
                        torch.xpu.empty_cache()
                with record_function("backward"):
                    t0 = time.perf_counter()
                    work(args.work_ms / 2 * rows)
                    opt.zero_grad()
                    loss.backward()  # DDP all-reduces the gradients here
                    backward = time.perf_counter() - t0
                opt.step()
                if saves is not None and step > 0 and step % args.save_every == 0:
                    # a checkpoint, as a training loop saves one: on a device the state dict
                    # is copied to pageable host memory, then written
                    torch.save(model.state_dict(), saves / f"model-{info.rank}.pt")
                prof.step()
                end = time.perf_counter()
                if step > 0:  # the first step warms up (DDP's first all-reduce, allocations)
                    for name, value in (("forward", forward), ("backward", backward),
                                        ("step", end - start)):  # fmt: skip
                        timings[name].append(value)
                start = end
        folder = timings_dir(args)
        if folder is not None:
            params = {"steps": args.steps, "work_ms": args.work_ms, "problems": sorted(asked)}
            write_timings(
                folder, timing_record(APP, info, info.local_rank, "float32", params, timings)
            )
        if info.rank == 0:
            flush_print(
                f"pathologies: {args.steps} steps with {', '.join(sorted(asked)) or 'none'}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
