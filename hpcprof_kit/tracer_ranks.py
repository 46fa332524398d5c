"""Which ranks a tracer wrapper traces: the seeds' rule (local rank == PROFRANK and global rank
< RANKCUTOFF, exclusive), checked against a job's shape and named in words.

>>> traced_ranks(world_size=48, ranks_per_node=12, profrank=0, rankcutoff=48)
[0, 12, 24, 36]
"""

from __future__ import annotations

from hpcprof_kit.errors import SpecError


def check_rank_selection(
    profrank: int,
    rankcutoff: int | None = None,
    ranks_per_node: int | None = None,
    world_size: int | None = None,
) -> None:
    """SpecError unless ``profrank``/``rankcutoff`` select at least one rank of the job.

    ``profrank`` is a local rank (0 .. ranks_per_node-1); ``rankcutoff`` is exclusive, so it runs
    from profrank+1 up to the job's rank count (or None: no cutoff). Without the job's shape
    only the rules that hold for every job are checked.

    >>> check_rank_selection(profrank=0, rankcutoff=48, ranks_per_node=12, world_size=48)
    >>> check_rank_selection(profrank=12, ranks_per_node=12)
    Traceback (most recent call last):
    ...
    hpcprof_kit.errors.SpecError: profrank 12 is outside 0-11: it is a local rank (compared with the launcher's local rank, e.g. PALS_LOCAL_RANKID) and the job runs 12 ranks per node; pick the local rank to trace on each node, e.g. profrank=0
    """
    for name, value in (("profrank", profrank), ("rankcutoff", rankcutoff)):
        if (value is not None or name == "profrank") and (
            isinstance(value, bool) or not isinstance(value, int)
        ):
            raise SpecError(f"{name} {value!r} is not a whole number; pass an int such as {name}=0")
    what = "it is a local rank (compared with the launcher's local rank, e.g. PALS_LOCAL_RANKID)"
    if ranks_per_node is not None and not 0 <= profrank < ranks_per_node:
        raise SpecError(
            f"profrank {profrank} is outside 0-{ranks_per_node - 1}: {what} and the job runs "
            f"{ranks_per_node} ranks per node; pick the local rank to trace on each node, "
            "e.g. profrank=0"
        )
    if profrank < 0:
        raise SpecError(
            f"profrank {profrank} is negative: {what}; pick the local rank to trace on each "
            "node, e.g. profrank=0"
        )
    if rankcutoff is None:
        return
    low = profrank + 1
    rule = (
        f"the cutoff is exclusive: ranks below it whose local rank is {profrank} are traced, "
        f"and the first of them is rank {profrank}"
    )
    if world_size is not None and not low <= rankcutoff <= world_size:
        raise SpecError(
            f"rankcutoff {rankcutoff} is outside {low}-{world_size} ({rule}; the job has "
            f"{world_size} ranks); pick {low}-{world_size} (rankcutoff={world_size} traces local "
            f"rank {profrank} on every node), or None for no cutoff"
        )
    if rankcutoff < low:
        raise SpecError(
            f"rankcutoff {rankcutoff} traces no rank ({rule}); use rankcutoff >= {low}, "
            "or None for no cutoff"
        )


def traced_ranks(
    world_size: int,
    ranks_per_node: int,
    profrank: int = 0,
    rankcutoff: int | None = None,
    *,
    all_ranks: bool = False,
) -> list[int]:
    """The ranks a wrapper traces when ranks fill nodes in order (block placement).

    The wrapper's rule: local rank == PROFRANK and global rank < RANKCUTOFF (no cutoff: every
    node). With block placement rank r has local rank r % ranks_per_node.

    >>> traced_ranks(world_size=24, ranks_per_node=12, profrank=0, rankcutoff=13)
    [0, 12]
    >>> traced_ranks(world_size=48, ranks_per_node=12, profrank=0, rankcutoff=48)
    [0, 12, 24, 36]
    """
    if all_ranks:
        return list(range(world_size))
    if not 0 <= profrank < ranks_per_node:
        return []  # no rank has that local rank
    end = world_size if rankcutoff is None else min(rankcutoff, world_size)
    return list(range(profrank, end, ranks_per_node))


def describe_traced_ranks(
    world_size: int,
    ranks_per_node: int,
    profrank: int = 0,
    rankcutoff: int | None = None,
    shown: int = 6,
    *,
    all_ranks: bool = False,
) -> str:
    """The exact traced ranks in words: every one up to ``shown``, else the first three, the
    last and the count.

    >>> describe_traced_ranks(48, 12, profrank=0, rankcutoff=48)
    'ranks 0, 12, 24, 36'
    >>> describe_traced_ranks(24, 12)
    'local rank 0 of every node (ranks 0, 12)'
    >>> describe_traced_ranks(1200, 12, rankcutoff=1200)
    'ranks 0, 12, 24, ..., 1188 (100 ranks)'
    """
    ranks = traced_ranks(world_size, ranks_per_node, profrank, rankcutoff, all_ranks=all_ranks)
    if all_ranks:
        return f"every rank ({world_size})"
    if not ranks:
        text = "no rank"
    elif len(ranks) <= shown:
        text = ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))
    else:
        text = (
            "ranks " + ", ".join(map(str, ranks[:3])) + f", ..., {ranks[-1]} ({len(ranks)} ranks)"
        )
    return text if rankcutoff is not None else f"local rank {profrank} of every node ({text})"
