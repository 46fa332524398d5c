"""What every rule shares: the :class:`Rule` record and its registry, the prepared view of a
run the rules read (:class:`RunView`), the finding's shape and the run's own noise.

A rule is one function ``check(view) -> list[finding]`` registered with :func:`rule`, beside
its kind, definition, threshold, noise test and advice. :func:`needs_met` says before it runs
whether the run has what it needs (steps, a device, several ranks, enough steps, the signal
columns); a rule that cannot run is named with why, never taken as "nothing found".

>>> r = RULES["straggler"]
>>> r.kind, r.threshold, "steps" in r.needs
('straggler', 5.0, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# A rule fires only when its effect (ms per step) beats this many times the run's own spread.
NOISE_TIMES = 3.0
# A last step shorter than this share of the rank's median step was cut off by the profiler.
TRUNCATED_SHARE = 0.5


@dataclass(frozen=True)
class Rule:
    """One diagnosis rule: ``kind``, what it measures (``definition``), its ``threshold`` in
    ``unit``, the ``noise`` test in words, the ``advice`` it gives, what it ``needs`` to run
    (``steps``, ``device``, ``ranks``, ``min_steps:N``, or signal columns) and ``check``;
    ``no_device``, when the rule needs a device, says why a CPU-only run has nothing for it."""

    kind: str
    definition: str
    threshold: float
    unit: str
    noise: str
    advice: str
    needs: tuple[str, ...]
    check: Callable[[RunView], list[dict]]
    no_device: str = ""


RULES: dict[str, Rule] = {}


def rule(kind: str, *, definition: str, threshold: float, unit: str, noise: str, advice: str,
         needs: tuple[str, ...] = (), no_device: str = "") -> Callable:  # fmt: skip
    """Register ``check`` as the rule of ``kind`` (a decorator)."""

    def register(check: Callable[[RunView], list[dict]]) -> Callable[[RunView], list[dict]]:
        RULES[kind] = Rule(kind, definition, threshold, unit, noise, advice, needs, check,
                           no_device)  # fmt: skip
        return check

    return register


def _rank_spreads(rows: pd.DataFrame) -> list[float]:
    """Per rank with four steps or more: 1.4826 x the MAD of its step wall times (ms), its
    first step left out."""
    ordered = rows.sort_values(["rank", "step"], kind="stable")
    ranks = ordered["rank"].to_numpy()
    wall = ordered["wall_ns"].to_numpy(dtype=float) / 1e6
    spreads = []
    for w in np.split(wall, np.flatnonzero(np.diff(ranks)) + 1) if wall.size else []:
        w = w[1:]
        if w.size >= 3:
            spreads.append(1.4826 * float(np.median(np.abs(w - np.median(w)))))
    return spreads


def rows_by_rank(rows: np.ndarray, rank: np.ndarray) -> dict[int, np.ndarray]:
    """``rows`` split by their rank (ranks ascending), each part in the order ``rows`` had:
    one sort, not one pass over the table per rank.

    >>> {r: v.tolist() for r, v in rows_by_rank(np.array([0, 1, 3]), np.array([1, 0, 5, 1])).items()}
    {0: [1], 1: [0, 3]}
    """
    if not rows.size:
        return {}
    rows = rows[np.argsort(rank[rows], kind="stable")]
    ranks = rank[rows]
    cut = np.flatnonzero(ranks[1:] != ranks[:-1]) + 1
    return {int(ranks[i]): p for i, p in zip(np.r_[0, cut],
            np.split(rows, cut), strict=True)}  # fmt: skip


def rank_walls(b: pd.DataFrame) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Per rank (ascending) of a breakdown's real steps: the rank, its steps (ascending) and
    their wall times (ns, float), split by :func:`rows_by_rank` rather than a pandas group per
    rank.

    >>> import pandas as pd
    >>> [(r, s.tolist(), w.tolist()) for r, s, w in rank_walls(pd.DataFrame({"rank": [1, 0, 1],
    ...     "step": [4, 2, 3], "wall_ns": [9, 5, 7]}))]
    [(0, [2], [5.0]), (1, [3, 4], [7.0, 9.0])]
    """
    step = b["step"].to_numpy(dtype=np.int64)
    rows = np.flatnonzero(step >= 0)
    rows = rows[np.argsort(step[rows], kind="stable")]  # rows_by_rank keeps this order
    wall = b["wall_ns"].to_numpy(dtype=float)
    parts = rows_by_rank(rows, b["rank"].to_numpy(dtype=np.int64))
    return [(r, step[p], wall[p]) for r, p in parts.items()]


@dataclass
class RunView:
    """A run prepared once for every rule: ``b`` (``step_breakdown``), ``steps``
    (``rank_steps``), ``sig`` (:func:`~hpcprof_kit.traces.findings.signals.signals`),
    ``meta`` (per-rank metadata), and, when the trace table is at hand, ``df`` and ``gaps``;
    ``slower(rank)`` stands in for the straggler's kernels when there is no table. Rules
    leave their findings in ``found`` (later rules read them) and reasons in ``coverage``."""

    b: pd.DataFrame
    steps: pd.DataFrame
    sig: pd.DataFrame
    meta: dict
    df: pd.DataFrame | None = None
    gaps: pd.DataFrame | None = None
    slower: Callable[[int], list[dict]] | None = None
    found: dict[str, list[dict]] = field(default_factory=dict)
    coverage: dict[str, str] = field(default_factory=dict)

    @cached_property
    def truncated(self) -> set[tuple[int, int]]:
        """(rank, step) of last steps cut short by the end of the recording."""
        out = set()
        for rank, steps, wall in rank_walls(self.b):
            if wall.size >= 3 and wall[-1] < TRUNCATED_SHARE * np.median(wall[:-1]):
                out.add((rank, int(steps[-1])))
        return out

    @cached_property
    def rows(self) -> pd.DataFrame:
        """The breakdown rows the rules read: real steps less truncated ones, or, when the
        trace has no steps, the rank's whole trace (step -1)."""
        b = self.b
        real = b[b["step"] >= 0]
        if real.empty:
            return b
        keep = [
            (int(r), int(s)) not in self.truncated
            for r, s in zip(real["rank"], real["step"], strict=True)
        ]
        return real[np.asarray(keep, dtype=bool)]

    @cached_property
    def walls(self) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """:func:`rank_walls` of :attr:`rows`: per rank its steps and their wall times."""
        return rank_walls(self.rows)

    @cached_property
    def _rows_index(self) -> pd.MultiIndex:
        return self.rows.set_index(["rank", "step"]).index

    @cached_property
    def _sig_by_step(self) -> pd.DataFrame:
        return self.sig.set_index(["rank", "step"])

    @cached_property
    def stepped(self) -> bool:
        return bool((self.b["step"] >= 0).any())

    @cached_property
    def n_steps(self) -> int:
        return int(self.rows.loc[self.rows["step"] >= 0, "step"].nunique())

    @cached_property
    def on_device(self) -> bool:
        return bool((self.b["kind"] == "device").any())

    @property
    def step_noise_ms(self) -> float:
        """The run's step-to-step spread: the median over ranks of 1.4826 x the MAD of the
        rank's step wall times (ms), the first step and those a straggler finding explains
        set aside; 0 with fewer than three steps."""
        explained = frozenset(s for f in self.found.get("straggler", []) for s in f["steps"])
        if explained not in self._noise:  # asked by every rule's noise test: made once
            steady = self.rows[(self.rows["step"] >= 0) & ~self.rows["step"].isin(explained)]
            spreads = _rank_spreads(steady)
            self._noise[explained] = float(np.median(spreads)) if spreads else 0.0
        return self._noise[explained]

    @cached_property
    def _noise(self) -> dict[frozenset, float]:
        return {}

    @cached_property
    def spread_ms(self) -> float | None:
        """The step-to-step spread over every step (none set aside; the first step dropped):
        the median over ranks of 1.4826 x the MAD of the rank's step wall times (ms); None
        when no rank has four steps or more, too few to measure a spread."""
        spreads = _rank_spreads(self.rows[self.rows["step"] >= 0])
        return float(np.median(spreads)) if spreads else None

    def per_step(self, column: str) -> pd.Series:
        """``sig[column]`` per (rank, step) of :attr:`rows` (0 where the signals have none)."""
        # the (rank, step) indexes are built once per run, not once per rule
        return self._sig_by_step[column].reindex(self._rows_index).fillna(0).astype(float)

    def share(self, column: str) -> pd.Series:
        """``sig[column]`` (ns) per (rank, step) as % of that step's wall time."""
        import pandas as pd

        wall = pd.Series(self.rows["wall_ns"].to_numpy(dtype=float), self._rows_index)
        return 100.0 * self.per_step(column) / wall.where(wall > 0, np.nan)

    def beats_noise(self, effect_ms: float) -> bool:
        """Whether an effect of ``effect_ms`` per step (a median over the steps) stands out
        of the run's own spread: above 3 x the uncertainty of a median of that many steps
        (the step-to-step spread / sqrt(steps))."""
        return effect_ms > NOISE_TIMES * self.step_noise_ms / max(1, self.n_steps) ** 0.5

    def stands_out(self, effect_ms: float) -> bool:
        """Whether an effect of ``effect_ms`` per step beats 3 x the step-to-step spread
        itself (:attr:`spread_ms`), not only the uncertainty of a median: the stricter test
        of a share under a rule's threshold. False when the run has too few steps to
        measure its spread."""
        spread = self.spread_ms
        return spread is not None and effect_ms > NOISE_TIMES * max(spread, self.step_noise_ms)

    def wall_ms(self) -> float:
        """The median step wall time (ms) of :attr:`rows`."""
        return (
            float(np.median(self.rows["wall_ns"].to_numpy(dtype=float))) / 1e6
            if len(self.rows)
            else 0.0
        )


def needs_met(r: Rule, view: RunView) -> str | None:
    """Why ``r`` cannot run on ``view`` (a sentence), or None when it can."""
    for need in r.needs:
        if need == "steps" and not view.stepped:
            return "the trace has no ProfilerStep steps, and this rule compares steps"
        if need.startswith("min_steps:") and view.stepped:
            least = int(need.split(":")[1])
            if view.n_steps < least:
                have = f"{view.n_steps} whole step" + ("s" if view.n_steps != 1 else "")
                return f"too few steps to say ({have}, {least} needed)"
        if need == "device" and not view.on_device:
            why = "not applicable: the trace has no device events (a CPU-only run)"
            return f"{why}: {r.no_device}" if r.no_device else why
        if need == "ranks" and view.b["rank"].nunique() < 2:
            return "not applicable: one rank traced, nothing to compare it with"
        if need.startswith("sig:") and need[4:] not in view.sig.columns:
            return f"could not run: the run's signals lack {need[4:]!r} (made by an older kit)"
    return None


def lacks(view: RunView, *columns: str) -> str | None:
    """Why a rule reading ``columns`` of the signals cannot run (made by an older kit), or
    None when the signals have them all."""
    missing = [c for c in columns if c not in view.sig.columns]
    if missing:
        return f"could not run: the run's signals lack {missing[0]!r} (made by an older kit)"
    return None


def finding(kind: str, ranks, steps, value: float, summary: str, evidence: dict[str, Any],
            gain_ms: float | None = None, advice: str | None = None,
            threshold: float | None = None) -> dict:  # fmt: skip
    """A finding of ``kind``: its threshold (unless given: a lower floor the value was
    judged against), unit and (unless given) advice from the registry; ``gain_ms``, when
    known, is the estimated gain per step if fixed."""
    r = RULES[kind]
    out = {
        "kind": kind,
        "ranks": sorted({int(x) for x in ranks}),
        "steps": sorted({int(s) for s in steps}),
        "value": round(float(value), 3),
        "threshold": r.threshold if threshold is None else threshold,
        "unit": r.unit,
        "summary": summary,
        "evidence": evidence,
        "advice": r.advice if advice is None else advice,
    }
    if gain_ms is not None:
        out["gain_ms_per_step"] = round(float(gain_ms), 3)
    return out


def pct(part: np.ndarray, wall: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(wall > 0, 100.0 * part / np.where(wall > 0, wall, 1), 0.0)


def stepped(b: pd.DataFrame) -> pd.DataFrame:
    """The rows of a breakdown that are real ``ProfilerStep`` steps (not a whole-trace step)."""
    return b[b["step"].to_numpy() >= 0]


def share_rule(view: RunView, kind: str, column: str, min_ms: float = 0.05,
               floor: float | None = None):  # fmt: skip
    """The common test of a rule whose signal is time (ns) per (rank, step): per rank, the
    median share of its steps at or above the threshold and the median effect (ms per step)
    above ``min_ms`` and the run's noise. With ``floor`` (a share under the threshold), the
    share need only reach ``floor`` and the effect must beat the spread itself
    (:meth:`RunView.stands_out`). Returns (value, effect_ms, ranks, steps) for the ranks
    that pass (value and effect: the largest of theirs), or None."""
    share = view.share(column).dropna()
    if share.empty:
        return None
    least = RULES[kind].threshold if floor is None else floor
    noise = view.beats_noise if floor is None else view.stands_out
    ms = view.per_step(column) / 1e6
    per = share.groupby(level="rank").median()
    effect = ms.groupby(level="rank").median()
    hot = [int(r) for r, p, e in zip(per.index, per.to_numpy(), effect.reindex(per.index)
           .to_numpy(), strict=True) if p >= least and e >= min_ms and noise(float(e))]  # fmt: skip
    if not hot:
        return None
    mine = share[share.index.get_level_values("rank").isin(hot)]
    steps = sorted({int(s) for (_, s), v in mine.items() if v >= least and s >= 0})
    return float(per[hot].max()), float(effect[hot].max()), hot, steps
