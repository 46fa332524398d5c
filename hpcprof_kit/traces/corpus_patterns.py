"""Runs with the patterns no single rule of the list names, drawn from a seed like
:func:`~hpcprof_kit.traces.corpus.corpus_run`'s and simulated by the same code, each with its
answer key and what each pattern cost the run (the simulation's own what-if: the time the
slow rank made the others wait, the device idle a stall left, a checkpoint's copy and write):

- ``rotating_straggler``: in each of several steps a different rank computes 1.3-2x longer
  (uneven batches), and the others wait for it in the all-reduce;
- ``slow_steps``: the same steps slow on every rank, periodic or one-off: a copy of the
  model to pageable host memory, then host time with no traced op (a checkpoint's write);
- ``host_stall``: one rank's host stops mid-forward with no op (a GC pause), and its device
  idles.

:func:`unseen_run` rebuilds the 8-rank run of the issue that asked for them.

>>> run = pattern_run(3)
>>> {p["kind"] for p in run.key()} <= set(PATTERNS)
True
"""

from __future__ import annotations

import numpy as np

from hpcprof_kit.traces.corpus import PATTERNS, Problem, Run, drawn_run


def pattern_run(seed: int, max_ranks: int = 16, clean_share: float = 0.15) -> Run:
    """The run of ``seed``: 2-16 ranks (at most ``max_ranks``), 6-10 steps, CUDA or XPU
    names, 2-5 % jitter, and 1-3 of :data:`PATTERNS` (none in ``clean_share`` of the seeds),
    each with random ranks, steps and size."""
    rng = np.random.default_rng(seed + 7_000_001)
    run = drawn_run(rng, seed, 2, max_ranks)
    if rng.random() < clean_share:
        return run
    n = int(rng.integers(1, 4))
    chosen = [str(k) for k in rng.choice(PATTERNS, size=n, replace=False)]
    compute_ms = 3 * run.gemms * run.gemm_us / 1e3  # the step's GEMMs, forward and backward
    steps = list(range(run.steps))
    saved: list[int] = []
    if "slow_steps" in chosen:
        if rng.random() < 0.6:  # periodic: every 3 or 4 steps (every other step is the norm)
            period = int(rng.integers(3, 5))
            phase = int(rng.integers(0, period))
            saved = [s for s in steps if s % period == phase and s > 0]
        if len(saved) < 2:  # one-off, never the first step (that is a warm-up's)
            saved = [int(rng.integers(1, run.steps))]
        # a device model's state dict is copied to the host first: that copy syncs the device
        copy_mb = float(rng.uniform(8, 128))
        host_ms = float(rng.uniform(0.3, 1.0)) * compute_ms
        run.problems.append(Problem("slow_steps", list(range(run.ranks)), saved, host_ms,
                                    {"copy_mb": copy_mb}))  # fmt: skip
    if "host_stall" in chosen:
        free = [s for s in steps[1:] if s not in saved]
        stall_step = int(rng.choice(free))
        rank = int(rng.integers(0, run.ranks))
        ms = float(rng.uniform(0.8, 2.0)) * compute_ms
        run.problems.append(Problem("host_stall", [rank], [stall_step], ms))
    if "rotating_straggler" in chosen:
        many = int(rng.integers(max(3, run.steps // 2), run.steps + 1))
        slow_steps = sorted(int(s) for s in rng.choice(steps, many, replace=False))
        order = rng.permutation(run.ranks)
        by_step = {s: int(order[i % run.ranks]) for i, s in enumerate(slow_steps)}
        factor = float(rng.uniform(1.3, 2.0))
        run.problems.append(Problem("rotating_straggler", sorted(set(by_step.values())),
                                    slow_steps, factor, {"by_step": by_step}))  # fmt: skip
    return run


def unseen_run() -> Run:
    """The 8-rank NCCL run (H100 names, 7 steps numbered 1-7) of the issue that asked for the
    account, rebuilt from its description: in each step a different rank computes 1.7x longer
    (ranks 4, 7, 2, 5, 0, 3, 6 in steps 1-7); in steps 3 and 6 every rank copies 48 MB to
    pageable host memory, then spends 25 ms of host time with no traced op (a checkpoint);
    rank 2 stalls 60 ms mid-forward in step 4 (a GC pause)."""
    run = Run(ranks=8, steps=7, flavour="cuda", jitter=0.03, seed=46, gemms=8, gemm_us=1450.0,
              batch_mb=32.0, buckets=3, bucket_mb=25.0, first_step=1)  # fmt: skip
    by_step = dict(zip(range(1, 8), (4, 7, 2, 5, 0, 3, 6), strict=True))
    run.problems = [
        Problem("rotating_straggler", sorted(set(by_step.values())), list(by_step), 1.7,
                {"by_step": by_step}),
        Problem("slow_steps", list(range(8)), [3, 6], 25.0, {"copy_mb": 48.0}),
        Problem("host_stall", [2], [4], 60.0),
    ]  # fmt: skip
    return run
