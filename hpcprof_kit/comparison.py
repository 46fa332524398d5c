"""Is a difference between variants larger than the noise?

Two runs (eager vs compiled, two binding plans, two dtypes) never take exactly the same time:
each step varies. ``compare_variants`` summarises each variant's repeated measurements (step
times, say) by their median and spread; ``noise_verdict`` says, from those numbers only,
whether the medians differ by more than the noise, one sentence per variant.

The rule: a difference is larger than the noise when the variants' p10-p90 ranges (where the
middle 80 % of each variant's values lie) do not overlap. Otherwise it is "within noise": run
more steps, or on a quieter machine, before drawing a conclusion.

>>> table = compare_variants({"eager": [10, 11, 12, 11, 10], "compiled": [5, 6, 5, 6, 5]})
>>> print(noise_verdict(table))  # doctest: +NORMALIZE_WHITESPACE
compiled is faster than eager: median 5.00 ms vs 11.00 ms, 2.20x; the p10-p90 ranges do not
overlap (5.00-6.00 ms vs 10.00-11.60 ms): larger than the noise.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpcprof_kit.errors import SpecError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["MIN_SAMPLES", "UNSTABLE", "Repeated", "compare_variants", "difference",
           "noise_verdict", "repeat_until_stable"]  # fmt: skip

MIN_SAMPLES = 3  # fewer values have no spread worth the name


def _check_samples(samples: Mapping[str, Sequence[float]]) -> dict[str, list[float]]:
    if not isinstance(samples, Mapping) or not samples:
        raise SpecError(
            f"samples={samples!r} holds no variants; pass a dict such as "
            "{'eager': [step times...], 'compiled': [step times...]}"
        )
    checked: dict[str, list[float]] = {}
    for name, values in samples.items():
        try:
            numbers = [float(v) for v in values]
        except (TypeError, ValueError) as exc:
            raise SpecError(
                f"samples[{name!r}] must be a sequence of numbers (durations); got "
                f"{values!r}: {exc}"
            ) from None
        if len(numbers) < MIN_SAMPLES:
            raise SpecError(
                f"samples[{name!r}] has {len(numbers)} value(s); a spread needs at least "
                f"{MIN_SAMPLES}: record more steps (a longer profiler active window or more "
                "iterations) for this variant"
            )
        bad = [v for v in numbers if not math.isfinite(v)]
        if bad:
            raise SpecError(
                f"samples[{name!r}] holds {bad[0]!r}; every value must be a finite number: "
                "drop the steps that did not complete"
            )
        checked[str(name)] = numbers
    return checked


def compare_variants(
    samples: Mapping[str, Sequence[float]], baseline: str | None = None, unit: str = "ms"
) -> pd.DataFrame:
    """One row per variant: ``n``, ``median``, ``p10``, ``p90``, ``spread`` (p90 - p10) in
    ``unit``, and ``ratio``, the variant's median over the baseline's (below 1: faster).

    ``samples`` maps a variant's name to its repeated durations (at least 3 each, lower is
    faster); ``baseline`` is one of its names, the first one when left out. The baseline and
    unit travel in ``table.attrs`` for :func:`noise_verdict`.

    >>> compare_variants({"eager": [10, 11, 12], "compiled": [5, 6, 7]})  # doctest: +NORMALIZE_WHITESPACE
              n  median   p10   p90  spread  ratio
    variant
    eager     3    11.0  10.2  11.8     1.6  1.000
    compiled  3     6.0   5.2   6.8     1.6  0.545
    """
    import numpy as np
    import pandas as pd

    checked = _check_samples(samples)
    if baseline is None:
        baseline = next(iter(checked))
    if baseline not in checked:
        raise SpecError(
            f"baseline={baseline!r} is not one of the variants {list(checked)}; pass one of "
            "them, or leave baseline out to compare against the first"
        )
    rows = {}
    for name, values in checked.items():
        arr = np.asarray(values, dtype=float)
        p10, median, p90 = (float(np.percentile(arr, q)) for q in (10, 50, 90))
        rows[name] = {"n": arr.size, "median": median, "p10": p10, "p90": p90,
                      "spread": p90 - p10}  # fmt: skip
    table = pd.DataFrame.from_dict(rows, orient="index")
    base = table.loc[baseline, "median"]
    table["ratio"] = (table["median"] / base if base else np.nan).round(3)
    table.index.name = "variant"
    table.attrs.update(baseline=baseline, unit=unit)
    return table


def _numbers(table: pd.DataFrame, name: str) -> dict:
    """The figures behind one variant's verdict against the baseline."""
    row, base = table.loc[name], table.loc[table.attrs["baseline"]]
    return {
        "overlap": not (row["p10"] > base["p90"] or row["p90"] < base["p10"]),
        "faster": row["median"] < base["median"],
        "rows": (row, base),
    }


def difference(table: pd.DataFrame, name: str) -> str:
    """``"faster"``, ``"slower"`` or ``"within noise"``: variant ``name`` against the baseline of
    a :func:`compare_variants` table, by the module's rule.

    >>> difference(compare_variants({"eager": [10, 11, 12], "compiled": [5, 6, 7]}), "compiled")
    'faster'
    """
    _check_table(table)
    if name not in table.index or name == table.attrs["baseline"]:
        others = [str(n) for n in table.index if n != table.attrs["baseline"]]
        raise SpecError(
            f"name={name!r} is not a variant compared with the baseline "
            f"{table.attrs['baseline']!r}; pass one of {others}"
        )
    n = _numbers(table, name)
    if n["overlap"]:
        return "within noise"
    return "faster" if n["faster"] else "slower"


def _verdict(table: pd.DataFrame, name: str) -> str:
    """One sentence; the figures in the order of the names it gives."""
    baseline, unit = table.attrs["baseline"], table.attrs.get("unit", "ms")
    n = _numbers(table, name)
    row, base = n["rows"]
    noise = difference(table, name) == "within noise"
    first, second = (row, base) if noise or n["faster"] else (base, row)
    medians = f"median {first['median']:.2f} {unit} vs {second['median']:.2f} {unit}"
    ranges = (
        f"{first['p10']:.2f}-{first['p90']:.2f} {unit} vs "
        f"{second['p10']:.2f}-{second['p90']:.2f} {unit}"
    )
    if noise:
        return (
            f"{name} vs {baseline}: within noise ({medians}; the p10-p90 ranges overlap: {ranges})."
        )
    fast, slow = (name, baseline) if n["faster"] else (baseline, name)
    ratio = second["median"] / first["median"] if first["median"] > 0 else math.inf
    return (
        f"{fast} is faster than {slow}: {medians}, {ratio:.2f}x; the p10-p90 ranges do not "
        f"overlap ({ranges}): larger than the noise."
    )


def _check_table(table) -> None:
    needed = {"median", "p10", "p90", "spread"}
    baseline = getattr(table, "attrs", {}).get("baseline")
    if baseline is None or not needed <= set(getattr(table, "columns", ())):
        raise SpecError(
            f"table={type(table).__name__} is not a comparison table (it needs the columns "
            f"{sorted(needed)} and its baseline in .attrs); make it with compare_variants(samples)"
        )


def noise_verdict(table: pd.DataFrame) -> str:
    """One sentence per variant other than the baseline: is its difference from the baseline
    larger than the noise? Computed from ``table``'s numbers (see the module's rule).

    >>> table = compare_variants({"plan a": [10, 14, 11, 13], "plan b": [11, 12, 13, 12]})
    >>> print(noise_verdict(table))  # doctest: +NORMALIZE_WHITESPACE
    plan b vs plan a: within noise (median 12.00 ms vs 12.00 ms; the p10-p90 ranges overlap:
    11.30-12.70 ms vs 10.30-13.70 ms).
    """
    _check_table(table)
    baseline = table.attrs["baseline"]
    others = [str(n) for n in table.index if n != baseline]
    if not others:
        raise SpecError(
            f"table holds only its baseline {baseline!r}; compare_variants needs at least two "
            "variants to compare"
        )
    return "\n".join(_verdict(table, name) for name in others)


UNSTABLE = "not stable on this machine: run it again"


@dataclass
class Repeated:
    """A comparison measured again until each variant's verdict came out the same twice in a
    row (:func:`repeat_until_stable`): every repeat's table, and per variant its verdicts. A
    repeat may measure only the baseline and the variants whose verdict had not held yet: a
    variant's verdicts are those of the runs that measured it."""

    tables: list[pd.DataFrame]
    seconds: float = 0.0

    @property
    def table(self) -> pd.DataFrame:
        """The last repeat's table (the one whose verdicts the sentences give when stable)."""
        return self.tables[-1]

    @property
    def baseline(self) -> str:
        return str(self.table.attrs["baseline"])

    def variants(self) -> list[str]:
        return [str(n) for n in self.tables[0].index if n != self.baseline]

    def _runs(self, name: str) -> list[int]:
        """The numbers (from 1) of the runs that measured ``name``."""
        return [k + 1 for k, t in enumerate(self.tables) if name in t.index]

    def verdicts(self, name: str) -> list[str]:
        """``name``'s verdict in each repeat that measured it, in order."""
        return [difference(self.tables[k - 1], name) for k in self._runs(name)]

    def stable(self, name: str) -> bool:
        """Whether the last two repeats that measured ``name`` gave it the same verdict."""
        found = self.verdicts(name)
        return len(found) >= 2 and found[-1] == found[-2]

    def verdict(self, name: str) -> str:
        """``"faster"``, ``"slower"``, ``"within noise"`` when the last two repeats agree, else
        :data:`UNSTABLE`."""
        return self.verdicts(name)[-1] if self.stable(name) else UNSTABLE

    def summary(self) -> str:
        """How many times it ran and whether each variant's verdict held; no verdict in it."""
        held = [n for n in self.variants() if self.stable(n)]
        return (
            f"{len(self.tables)} run(s) of the comparison in {self.seconds:.0f} s; the verdict held "
            f"in the last two for {len(held)} of {len(self.variants())} variant(s)"
        )

    def __str__(self) -> str:
        unit = self.table.attrs.get("unit", "ms")
        lines = []
        for name in self.variants():
            runs = self._runs(name)
            if self.stable(name):
                last = self.tables[runs[-1] - 1]
                lines.append(f"{_verdict(last, name)} The same in runs {runs[-2]} and {runs[-1]}.")
                continue
            rows = [self.tables[k - 1].loc[name] for k in runs]
            base = [self.tables[k - 1].loc[self.baseline] for k in runs]
            ratios = ", ".join(f"{r['ratio']:.2f}" for r in rows)
            lines.append(
                f"{name} vs {self.baseline}: {UNSTABLE} (verdicts by run: "
                f"{', '.join(self.verdicts(name))}; medians across runs "
                f"{min(r['median'] for r in rows):.2f}-{max(r['median'] for r in rows):.2f} {unit}"
                f" vs {min(b['median'] for b in base):.2f}-{max(b['median'] for b in base):.2f} "
                f"{unit}; ratios {ratios})."
            )
        return "\n".join(lines)


def repeat_until_stable(
    measure: Callable[..., Mapping[str, Sequence[float]]],
    *,
    first: Mapping[str, Sequence[float]] | None = None,
    most: int = 3,
    time_limit_s: float | None = None,
    baseline: str | None = None,
    unit: str = "ms",
) -> Repeated:
    """Measure a comparison until every variant's verdict is the same in two runs in a row, at
    most ``most`` runs (two at least: one verdict alone has not held), starting no third or
    later run that would end past ``time_limit_s`` (judged by the longest run so far).
    ``measure()`` returns fresh samples (a sweep run again); a ``measure(names)`` that takes
    one argument is given the variants to run: the baseline and those whose verdict has not
    held yet (from the third run, only those that flipped; None in a first run it makes:
    every variant), so a repeat re-runs no variant that already holds. ``first`` is a run
    already made, counted as the first. A variant whose verdict did not hold is "not stable on this machine: run it
    again", with its spread across the runs.

    >>> runs = iter([{"a": [10, 11, 12], "b": [5, 6, 7]}, {"a": [10, 11, 12], "b": [13, 14, 15]},
    ...              {"a": [10, 11, 12], "b": [14, 15, 16]}])
    >>> result = repeat_until_stable(lambda: next(runs))
    >>> result.verdicts("b"), result.verdict("b")
    (['faster', 'slower', 'slower'], 'slower')
    >>> runs = iter([{"a": [10, 11, 12], "b": [5, 6, 7]}, {"a": [10, 11, 12], "b": [13, 14, 15]}])
    >>> print(repeat_until_stable(lambda: next(runs), most=2))  # doctest: +NORMALIZE_WHITESPACE
    b vs a: not stable on this machine: run it again (verdicts by run: faster, slower; medians
    across runs 6.00-14.00 ms vs 11.00-11.00 ms; ratios 0.55, 1.27).
    """
    import inspect

    start = time.monotonic()
    tables, longest = [], 0.0
    if first is not None:
        tables.append(compare_variants(first, baseline=baseline, unit=unit))
    result = Repeated(tables)
    try:
        chooses = len(inspect.signature(measure).parameters) == 1
    except (TypeError, ValueError):  # a builtin or a C callable: no signature to read
        chooses = False
    while len(tables) < max(most, 2):
        elapsed = time.monotonic() - start
        if len(tables) >= 2 and time_limit_s is not None and elapsed + longest > time_limit_s:
            break
        began = time.monotonic()
        if chooses and tables:
            again = [n for n in result.variants() if not result.stable(n)]
            samples = measure([result.baseline, *again])
        else:
            samples = measure(None) if chooses else measure()  # None: every variant
        base = baseline if baseline is not None or not tables else result.baseline
        tables.append(compare_variants(samples, baseline=base, unit=unit))
        longest = max(longest, time.monotonic() - began)
        if len(tables) >= 2 and all(result.stable(n) for n in result.variants()):
            break
    result.seconds = time.monotonic() - start
    return result
