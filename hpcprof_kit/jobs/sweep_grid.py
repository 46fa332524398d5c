"""The values of a sweep's grid: which fields may vary, each value typed as its field
declares (or kept as the text the user wrote), and a variant's spec made from them.

>>> from hpcprof_kit.jobs import JobSpec
>>> grid = parse_vary(["nodes=1", "--seed=0,1"], JobSpec(system="local"))
>>> grid
{'nodes': [1], '--seed': ['0', '1']}
>>> variant_spec(JobSpec(system="local"), {"nodes": 1, "--seed": "0"}).args
('--seed', '0')
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs.spec import JobSpec

__all__ = ["app_switches", "check_grid", "label_text", "parse_vary", "variant_spec"]

# JobSpec fields a sweep may vary: every field but the ones that make it another job entirely.
FIXED = ("system", "example", "command")
SPEC_FIELDS = {f.name: f.type for f in fields(JobSpec)}
VARIABLE = tuple(name for name in SPEC_FIELDS if name not in FIXED)
_TRUE, _FALSE = ("true", "on", "yes", "1"), ("false", "off", "no", "0")


def label_text(value: Any) -> str:
    """A value as a label shows it: ``True`` as ``true``, anything else as its text.

    >>> [label_text(v) for v in (True, 0, "1")]
    ['true', '0', '1']
    """
    return str(value).lower() if isinstance(value, bool) else str(value)


def variant_spec(base: JobSpec, values: Mapping[str, Any]) -> JobSpec:
    """``base`` with the spec fields of ``values`` set and its app flags appended to ``args``."""
    changes = {k: v for k, v in values.items() if not k.startswith("-")}
    words: list[str] = []
    for flag, value in values.items():
        if not flag.startswith("-"):
            continue
        if value is True:
            words.append(flag)
        elif value is not False and value is not None:
            words += [flag, str(value)]
    return base.with_(**changes, args=(*base.args, *words))


def check_grid(grid: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
    """The grid as lists, or SpecError naming the field, the value and the fix."""
    if not grid:
        raise SpecError(
            "the grid is empty; vary at least one field, e.g. sweep(nodes=[1, 2]) or "
            "--vary nodes=1,2"
        )
    checked: dict[str, list[Any]] = {}
    for name, values in grid.items():
        if name.startswith("-"):
            if not name.startswith("--") or len(name) < 3 or " " in name:
                raise SpecError(
                    f"field {name!r} is not an app flag; write app arguments as their long "
                    "flag, e.g. '--dtype'"
                )
        elif name not in SPEC_FIELDS:
            raise SpecError(
                f"field {name!r} is not a JobSpec field nor an app flag; vary one of "
                f"{', '.join(VARIABLE)}, or an app argument written with its dashes "
                f"('--{name.replace('_', '-')}')"
            )
        elif name in FIXED:
            raise SpecError(
                f"field {name!r} makes a different job, not a variant of one; make one sweep "
                f"per {name}"
            )
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise SpecError(
                f"field {name!r} takes a list of values, got {values!r}; pass e.g. [{values!r}]"
            )
        values = list(values)
        if not values:
            raise SpecError(
                f"field {name!r} has an empty value list; give it at least one value, or "
                "leave it out of the grid"
            )
        checked[name] = values
    return checked


def parse_vary(items: Sequence[str], base: JobSpec | None = None) -> dict[str, list[Any]]:
    """``--vary FIELD=V1,V2`` words -> a grid. Each value is the text as written, converted
    only where a declared type says so: a JobSpec int or bool field (``nodes``, ``profile``),
    or a switch of ``base``'s example (``--compile``, a flag that takes no value). Any other
    app flag's values reach the app as typed (``--seed=0,1`` gives ``--seed 0``, ``--seed 1``);
    ``--vary=--FLAG`` alone runs a switch off and on.

    >>> parse_vary(["nodes=1,2", "--epochs=1,2", "--dtype=float32"])
    {'nodes': [1, 2], '--epochs': ['1', '2'], '--dtype': ['float32']}
    >>> from hpcprof_kit.jobs import JobSpec
    >>> parse_vary(["--compile=off,on", "--seed=0,1"], JobSpec(example="train"))
    {'--compile': [False, True], '--seed': ['0', '1']}
    >>> parse_vary(["--my-switch"])
    {'--my-switch': [False, True]}
    """
    switches = app_switches(base) if base is not None else frozenset()
    grid: dict[str, list[Any]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if name.startswith("--") and len(name) > 2 and not sep:
            grid[name] = [False, True]  # a switch of any program: left out, then given
            continue
        if not sep or not name:
            raise SpecError(
                f"--vary {item!r} is not FIELD=V1,V2; e.g. --vary nodes=1,2 or "
                "--vary=--dtype=float32,bfloat16 (or --vary=--FLAG for a switch off and on)"
            )
        words = text.split(",")
        if "" in words:
            raise SpecError(
                f"--vary {item!r}: value {words.index('') + 1} of {name!r} is empty; write "
                "each value between commas (a stray comma?), e.g. --vary nodes=1,2"
            )
        grid[name] = [_typed(name, w, name in switches) for w in words]
    return grid


def app_switches(base: JobSpec) -> frozenset[str]:
    """The flags of ``base``'s example that take no value (``--compile``): a sweep turns them
    on or off. Empty for a command of your own, whose flags the kit cannot read.

    >>> from hpcprof_kit.jobs import JobSpec
    >>> "--compile" in app_switches(JobSpec(example="train"))
    True
    """
    if base.command is not None:
        return frozenset()
    return _example_switches(base.example)


@functools.cache
def _example_switches(example: str) -> frozenset[str]:
    import argparse
    import importlib

    from hpcprof_kit.jobs.examples import EXAMPLES

    if example not in EXAMPLES:
        return frozenset()
    build = getattr(importlib.import_module(EXAMPLES[example].module), "build_parser", None)
    if build is None:
        return frozenset()
    parser: argparse.ArgumentParser = build()
    return frozenset(
        flag
        for action in parser._actions  # argparse keeps no public list of its actions
        if action.nargs == 0 and action.const is True
        for flag in action.option_strings
        if flag.startswith("--")
    )


def _typed(name: str, word: str, switch: bool = False) -> Any:
    kind = str(SPEC_FIELDS.get(name, ""))
    low = word.lower()
    if kind == "bool" or switch:
        if low not in _TRUE + _FALSE:
            what = f"field {name!r}" if kind == "bool" else f"{name} is a switch (no value); it"
            raise SpecError(
                f"{what} takes on or off; {word!r} is neither: write one of "
                f"{', '.join(_TRUE + _FALSE)}"
            )
        return low in _TRUE
    if kind.startswith("int"):
        try:
            return int(word)
        except ValueError:
            raise SpecError(f"field {name!r} takes whole numbers; {word!r} is not one") from None
    return word
