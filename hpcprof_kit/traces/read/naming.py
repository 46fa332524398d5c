"""What a trace file's name says (rank, world size, cycle, prefix), and whether files are one run.

>>> rank_from_file_name("train-3-of-8.json.gz"), cycle_from_file_name("train_cycle2-3-of-8.json")
((3, 8), ('train', 2))
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import TraceFormatError

# File-name rank patterns, as data: (regex, group of the rank, group of the world size or 0).
RANK_IN_NAME = [
    (re.compile(r"-(\d+)-of-(\d+)\.json(\.gz)?$"), 1, 2),  # the kit's own naming
    (re.compile(r"\.(\d+)\.(\d+)\.json(\.gz)?$"), 2, 0),  # unitrace <app>.<pid>.<rank>.json
    (re.compile(r"rank[_-]?(\d+)(?:[_-]of[_-](\d+))?", re.IGNORECASE), 1, 2),
]
# The kit's cycle files: <prefix>_cycle<k>-<rank>-of-<world>.json; the first cycle has no tag.
KIT_NAME = re.compile(r"^(?P<prefix>.*?)(?:_cycle(?P<cycle>\d+))?-\d+-of-\d+\.json(\.gz)?$")


def cycle_from_file_name(name: str) -> tuple[str | None, int]:
    """(prefix, cycle) of a file named by the profiler factory, else (None, 0).

    >>> cycle_from_file_name("mlp_cycle1-0-of-2.json"), cycle_from_file_name("mlp-0-of-2.json")
    (('mlp', 1), ('mlp', 0))
    """
    m = KIT_NAME.match(name)
    if not m:
        return None, 0
    return m.group("prefix"), int(m.group("cycle") or 0)


def rank_from_file_name(name: str) -> tuple[int | None, int | None]:
    """(rank, world size) from a trace file name, or (None, None).

    >>> rank_from_file_name("train-3-of-8.json.gz"), rank_from_file_name("python.1234.5.json")
    ((3, 8), (5, None))
    """
    for regex, rank_group, world_group in RANK_IN_NAME:
        m = regex.search(name)
        if m:
            world = m.group(world_group) if world_group else None
            return int(m.group(rank_group)), int(world) if world else None
    return None, None


def check_one_run(files: list[Path], found: list[Any]) -> None:
    """Raise TraceFormatError when the files come from different runs: two files of one rank
    claiming the same cycle or carrying two prefixes (the cycles of one run share theirs), or
    ranks whose traces record different world sizes or different devices. ``found`` holds
    each file's parsed part (its ``rank`` and ``meta``)."""
    claimed: dict[int, tuple[Path, str | None, set[int]]] = {}
    for f, part in zip(files, found, strict=True):
        prefix, cycle = cycle_from_file_name(f.name)
        if part.rank not in claimed:
            claimed[part.rank] = (f, prefix, {cycle})
            continue
        first, first_prefix, cycles = claimed[part.rank]
        if prefix is None or first_prefix is None:
            why = "their names say no cycle: <prefix>_cycle<k>-<rank>-of-<world>.json"
        elif prefix != first_prefix:
            why = f"their prefixes differ: {first_prefix!r}, {prefix!r}"
        elif cycle in cycles:
            why = f"both are cycle {cycle}"
        else:
            cycles.add(cycle)
            continue
        raise TraceFormatError(
            f"two files claim rank {part.rank}: {first} and {f} ({why}); load them "
            "separately (they are different runs), e.g. one prefix at a time with a glob "
            "such as 'traces/trace*', or rename one as <prefix>-<rank>-of-<world>.json"
        )
    check_same_run(files, found)


# What every rank of one run records alike, and how to read it from a part's metadata; a rank
# that records nothing of one (no distributedInfo, no device) is not compared on it.
RUN_FACTS = {
    "world sizes": lambda meta: meta.get("world_size"),
    "devices": lambda meta: tuple(sorted({str(p.get("name")) for p in meta.get("device_properties")
                                          or [] if p.get("name")})) or None,
}  # fmt: skip


def check_same_run(files: list[Path], found: list[Any]) -> None:
    """Raise TraceFormatError naming the first fact (``RUN_FACTS``) on which two files differ.

    >>> from types import SimpleNamespace as P
    >>> check_same_run([Path("a-0-of-8.json"), Path("b-1-of-2.json")],
    ...                  [P(meta={"world_size": 8}), P(meta={"world_size": 2})])
    Traceback (most recent call last):
    ...
    hpcprof_kit.errors.TraceFormatError: a-0-of-8.json and b-1-of-2.json come from different runs: they record different world sizes (8 against 2); load each run on its own (a folder or a glob per run)
    """
    for fact, read in RUN_FACTS.items():
        first: tuple[Path, Any] | None = None
        for f, part in zip(files, found, strict=True):
            value = read(part.meta)
            if value is None:
                continue
            if first is None:
                first = (f, value)
            elif value != first[1]:
                shown = [", ".join(v) if isinstance(v, tuple) else v for v in (first[1], value)]
                raise TraceFormatError(
                    f"{first[0]} and {f} come from different runs: they record different {fact} "
                    f"({shown[0]} against {shown[1]}); load each run on its own (a folder or "
                    "a glob per run)"
                )
