"""Which ranks a profiler traces and which activities it records: parsing the learner's choices.

>>> rank_is_selected("0,3", rank=3, world_size=4)
True
>>> rank_is_selected("first-local", rank=5, world_size=8, local_rank=1)
False
"""

from __future__ import annotations

from typing import Any

from hpcprof_kit.errors import SpecError

ACTIVITY_NAMES = ("cpu", "cuda", "xpu")


def local_rank_from_env(env: dict[str, str] | None = None) -> int:
    """This process's local rank, read by ``hpcprof_kit.dist`` from the launcher's variables."""
    from hpcprof_kit.ranks import ranks_from_env

    return ranks_from_env(env, use_mpi=False).local_rank


def parse_ranks(ranks: str | list[int] | tuple[int, ...], world_size: int) -> str | list[int]:
    """``"all"``, ``"first-local"`` or a sorted list of ranks, each checked against ``world_size``.

    >>> parse_ranks("3, 0", world_size=4)
    [0, 3]
    """
    if isinstance(ranks, str):
        text = ranks.strip().lower()
        if text in ("all", "first-local"):
            return text
        try:
            chosen = [int(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise SpecError(
                f"trace ranks {ranks!r} is not 'all', 'first-local' or a comma list of ranks "
                "such as '0,1'; pass one of these"
            ) from None
    else:
        chosen = [int(r) for r in ranks]
    if not chosen:
        raise SpecError("trace ranks is empty; pass 'all', 'first-local' or ranks such as '0'")
    bad = [r for r in chosen if not 0 <= r < world_size]
    if bad:
        raise SpecError(
            f"trace ranks {bad} are outside this job (world size {world_size}: ranks 0-{world_size - 1}); "
            "pick ranks below the world size"
        )
    return sorted(set(chosen))


def rank_is_selected(
    ranks: str | list[int],
    rank: int,
    world_size: int,
    local_rank: int | None = None,
) -> bool:
    """True when ``rank`` is one of the ranks to trace."""
    chosen = parse_ranks(ranks, world_size)
    if chosen == "all":
        return True
    if chosen == "first-local":
        local = local_rank if local_rank is not None else local_rank_from_env()
        return local == 0
    return rank in chosen


def available_activities() -> list[str]:
    """Activities this machine can record: CPU always, plus CUDA or XPU when a device is present."""
    import torch
    import torch.profiler

    supported = {a.name.lower() for a in torch.profiler.supported_activities()}
    found = ["cpu"]
    if "cuda" in supported and torch.cuda.is_available():
        found.append("cuda")
    xpu = getattr(torch, "xpu", None)
    if "xpu" in supported and xpu is not None and xpu.is_available():
        found.append("xpu")
    return found


def parse_activities(activities: Any) -> list[str]:
    """``"auto"`` → what is available here; else a checked list of ``cpu``/``cuda``/``xpu``,
    given as a comma list, names, or ``torch.profiler.ProfilerActivity`` values.

    >>> parse_activities("auto")[0]
    'cpu'
    >>> import torch.profiler
    >>> parse_activities([torch.profiler.ProfilerActivity.CPU])
    ['cpu']
    """
    if isinstance(activities, str):
        if activities.strip().lower() == "auto":
            return available_activities()
        wanted = [a.strip().lower() for a in activities.split(",") if a.strip()]
    else:
        items = activities if isinstance(activities, (list, tuple, set)) else [activities]
        # ProfilerActivity.CUDA has .name "CUDA"; its str() is "ProfilerActivity.CUDA"
        wanted = [str(getattr(a, "name", a)).strip().lower() for a in items]
    unknown = [a for a in wanted if a not in ACTIVITY_NAMES]
    if unknown or not wanted:
        raise SpecError(
            f"activities {activities!r}: {unknown or 'empty'} not among {', '.join(ACTIVITY_NAMES)}; "
            "pass 'auto', a comma list such as 'cpu,cuda', or ProfilerActivity values"
        )
    here = available_activities()
    missing = [a for a in wanted if a not in here]
    if missing:
        raise SpecError(
            f"activities {activities!r}: {', '.join(missing)} cannot be recorded on this machine "
            f"(available: {', '.join(here)}); pass activities='auto' (--activities auto "
            "on an app's command line) to record what this machine has"
        )
    return wanted
