"""On-demand tracing of a running job: the kit's own trigger (no daemon) and the Dynolog recipe.

In the job (no code change): ``python -m hpcprof_kit.ondemand -- app.py args...``, or one call in
the app: ``hpcprof_kit.ondemand.install(optimizer)``. From outside, while it trains:
``hpcprof-kit trace RUN_DIR --steps 3`` (or :func:`request_trace`). Each rank records its next
N optimizer steps into ``traces/ondemand-<id>-<rank>-of-<world>.json``.

>>> from hpcprof_kit.ondemand import dynolog_recipe
>>> "KINETO_USE_DAEMON=1" in dynolog_recipe("slurm", nodes=2, ranks_per_node=4)
True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import OnDemandError
from hpcprof_kit.ondemand.dynolog import dynolog_recipe
from hpcprof_kit.ondemand.request import TraceAnswer, live_ranks, request_trace
from hpcprof_kit.ondemand.trigger import OnDemandTrigger
from hpcprof_kit.paths import current_run_dir


def install(
    optimizer: Any = None, run_dir: str | os.PathLike[str] | None = None
) -> OnDemandTrigger:
    """Listen for trace requests after each optimizer step of this rank.

    ``optimizer``: hook that optimizer only; None hooks every optimizer in the process (what
    ``python -m hpcprof_kit.ondemand`` does; with several optimizers, pass the main one).
    ``run_dir``: defaults to ``$HPCPROF_RUN_DIR``.
    """
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from hpcprof_kit.ranks import ranks_from_env

    folder = Path(run_dir) if run_dir is not None else current_run_dir()
    if folder is None:
        raise OnDemandError(
            "on-demand tracing needs a run directory: HPCPROF_RUN_DIR is not set; run inside a "
            "job made by the kit, or pass run_dir=... (--run-dir)"
        )
    info = ranks_from_env(use_mpi=False)
    trigger = OnDemandTrigger(folder, info.rank, info.world_size)
    if optimizer is None:
        register_optimizer_step_post_hook(trigger.after_step)
    else:
        optimizer.register_step_post_hook(trigger.after_step)
    return trigger


__all__ = [
    "OnDemandTrigger",
    "TraceAnswer",
    "dynolog_recipe",
    "install",
    "live_ranks",
    "request_trace",
]
