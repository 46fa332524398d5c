"""CPU lists as text: parse the launchers' binding strings and write them back.

One binding, four spellings: Cray PALS ``--cpu-bind list:4-7:8-11`` (or ``--depth=8
--cpu-bind depth``), Hydra ``-bind-to user:4+5+6+7,8+9+10+11`` (or ``core``), Slurm
``--cpu-bind=map_cpu:4,8`` / ``mask_cpu:0xf0,0xf00``. This module turns any of them into a
:class:`ParsedBind` and back, without knowing anything about the node.

>>> parse_cpu_bind("list:4-7:8-11").cpus
((4, 5, 6, 7), (8, 9, 10, 11))
>>> format_cpus((1, 2, 3, 105, 106, 107))
'1-3,105-107'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hpcprof_kit.errors import BindingError

# Forms a binding can take; "list" carries explicit per-rank CPUs, the others are rules.
STYLES = ("list", "depth", "core", "reversed", "none")


@dataclass(frozen=True)
class ParsedBind:
    """A binding read from text: a style plus explicit per-rank CPUs (style "list") or a depth."""

    style: str
    cpus: tuple[tuple[int, ...], ...] = ()
    depth: int | None = None
    text: str = ""


def parse_cpus(text: str, *, where: str = "cpu list") -> tuple[int, ...]:
    """Parse ``"1-3,8"`` (Linux cpulist syntax) into sorted CPU numbers.

    >>> parse_cpus("1-3,8")
    (1, 2, 3, 8)
    """
    out: set[int] = set()
    for token in filter(None, (t.strip() for t in text.split(","))):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", token)
        if not m:
            raise BindingError(
                f"{where}: token {token!r} is not a CPU number or range; "
                "write CPUs as 4, 4-7 or 4-7,108-111"
            )
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise BindingError(
                f"{where}: range {token!r} runs backwards ({lo} > {hi}); write it as {hi}-{lo}"
            )
        out.update(range(lo, hi + 1))
    if not out:
        raise BindingError(f"{where}: {text!r} names no CPU; give at least one, e.g. 4-7")
    return tuple(sorted(out))


def format_cpus(cpus: tuple[int, ...] | list[int] | set[int], sep: str = ",") -> str:
    """Write CPU numbers compactly as ranges (``0-3,8``); the inverse of :func:`parse_cpus`.

    >>> format_cpus([8, 0, 1, 2, 3])
    '0-3,8'
    """
    nums = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return sep.join(parts)


def _strip_flags(text: str) -> tuple[str, int | None]:
    """Drop launcher flag names around the value; pull out a ``--depth=N`` / ``-d N``."""
    depth = None
    m = re.search(r"(?:--depth[= ]|-d\s+)(\S+)", text)
    if m:
        if not m.group(1).isdigit() or int(m.group(1)) < 1:
            raise BindingError(
                f"depth: token {m.group(1)!r} is not a positive whole number; write --depth=8"
            )
        depth = int(m.group(1))
        text = text[: m.start()] + text[m.end() :]
    text = re.sub(r"(--cpu-bind|-bind-to|--bind-to)[= ]?", " ", text)
    return text.strip(), depth


def parse_cpu_bind(text: str) -> ParsedBind:
    """Read a launcher's binding string into a :class:`ParsedBind`.

    Accepts PALS ``list:A:B``, ``depth`` (``--depth=8 --cpu-bind depth`` or ``depth:8``),
    Hydra ``user:1,0`` / ``user:0+1,2+3`` and ``core``, Slurm ``map_cpu:`` / ``mask_cpu:``,
    ``reversed`` and ``none``. Raises BindingError naming the token that does not parse.

    >>> parse_cpu_bind("--depth=8 --cpu-bind depth")
    ParsedBind(style='depth', cpus=(), depth=8, text='--depth=8 --cpu-bind depth')
    >>> parse_cpu_bind("user:1,0").cpus
    ((1,), (0,))
    >>> parse_cpu_bind("mask_cpu:0x3,0xc").cpus
    ((0, 1), (2, 3))
    """
    original = text
    body, depth = _strip_flags(text)
    kind, _, rest = body.partition(":")
    kind = kind.strip().lower()
    if kind == "list":
        cpus = tuple(
            parse_cpus(part, where=f"list entry {i} of {original!r}")
            for i, part in enumerate(rest.split(":"))
        )
        return ParsedBind("list", cpus, text=original)
    if kind == "user":
        cpus = tuple(
            parse_cpus(part.replace("+", ","), where=f"user entry {i} of {original!r}")
            for i, part in enumerate(rest.split(","))
        )
        return ParsedBind("list", cpus, text=original)
    if kind == "map_cpu":
        cpus = tuple(
            parse_cpus(part, where=f"map_cpu entry {i} of {original!r}")
            for i, part in enumerate(rest.split(","))
        )
        return ParsedBind("list", cpus, text=original)
    if kind == "mask_cpu":
        return ParsedBind(
            "list", tuple(_mask_to_cpus(m, original) for m in rest.split(",")), text=original
        )
    if kind == "depth":
        if rest:
            _, d = _strip_flags(f"--depth={rest}")
            depth = d
        if depth is None:
            raise BindingError(
                f"cpu-bind {original!r}: a depth binding needs its depth; "
                "write '--depth=8 --cpu-bind depth' or 'depth:8'"
            )
        return ParsedBind("depth", depth=depth, text=original)
    if kind in ("core", "cores") and not rest:
        return ParsedBind("core", text=original)
    if kind in ("none", "reversed") and not rest:
        return ParsedBind(kind, text=original)
    raise BindingError(
        f"cpu-bind {original!r}: token {kind!r} is not a binding form; use one of "
        "list:4-7:8-11, depth:8, user:1,0, map_cpu:1,0, mask_cpu:0x2,0x1, core, reversed, none"
    )


def _mask_to_cpus(mask: str, original: str) -> tuple[int, ...]:
    try:
        value = int(mask, 16)
    except ValueError:
        raise BindingError(
            f"mask_cpu of {original!r}: token {mask!r} is not a hexadecimal mask; write 0xf0"
        ) from None
    cpus = tuple(i for i in range(value.bit_length()) if value >> i & 1)
    if not cpus:
        raise BindingError(f"mask_cpu of {original!r}: mask {mask!r} selects no CPU")
    return cpus


def pals_list(cpus: tuple[tuple[int, ...], ...]) -> str:
    """PALS ``list:`` value: ranks separated by colons, CPUs of one rank by commas.

    >>> pals_list(((4, 5, 6, 7), (8, 9)))
    'list:4-7:8-9'
    """
    return "list:" + ":".join(format_cpus(c) for c in cpus)


def hydra_user(cpus: tuple[tuple[int, ...], ...]) -> str:
    """Hydra ``user:`` value: ranks separated by commas, CPUs of one rank joined with ``+``.

    >>> hydra_user(((1,), (0,)))
    'user:1,0'
    >>> hydra_user(((0, 1), (2, 3)))
    'user:0+1,2+3'
    """
    return "user:" + ",".join("+".join(str(c) for c in sorted(r)) for r in cpus)


def srun_cpu_bind(cpus: tuple[tuple[int, ...], ...]) -> str:
    """Slurm ``--cpu-bind`` value: ``map_cpu`` when each rank has one CPU, else ``mask_cpu``.

    >>> srun_cpu_bind(((1,), (0,)))
    'map_cpu:1,0'
    >>> srun_cpu_bind(((4, 5, 6, 7), (8, 9, 10, 11)))
    'mask_cpu:0xf0,0xf00'
    """
    if all(len(r) == 1 for r in cpus):
        return "map_cpu:" + ",".join(str(r[0]) for r in cpus)
    return "mask_cpu:" + ",".join(hex(sum(1 << c for c in r)) for r in cpus)
