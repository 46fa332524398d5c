"""What every rule shares: the :class:`Rule` record and its registry, what a rule needs of the
run's prepared view (:class:`~hpcprof_kit.traces.view.run_view.RunView`), the finding's shape.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hpcprof_kit.traces.view.run_view import RunView

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


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
            missing = device_events_missing(view)
            if missing is not None:
                return missing
            why = "not applicable: the trace has no device events (a CPU-only run)"
            return f"{why}: {r.no_device}" if r.no_device else why
        if need == "ranks" and view.b["rank"].nunique() < 2:
            return "not applicable: one rank traced, nothing to compare it with"
        if need.startswith("sig:") and need[4:] not in view.sig.columns:
            return f"could not run: the run's signals lack {need[4:]!r} (made by an older kit)"
    return None


# collective backends that run on a device: NCCL, RCCL, oneCCL on XPU (xccl), Habana's hccl
DEVICE_BACKENDS = ("nccl", "rccl", "xccl", "hccl")
# host events that only a run on a device records: its runtime's calls (CUDA, HIP, MTIA,
# Unified Runtime, Level Zero), NCCL's process-group ops, CUPTI's range profiler
DEVICE_HOST_EVENTS = (r"^(?:cuda|cu|hip|ur|ze)[A-Z]\w+$|^nccl:|^runFunction - "
                      r"|^cuda_profiler_range|^MTIA|^mtia")  # fmt: skip


def device_use(view: RunView) -> list[str]:
    """On a run without device events, what says it still ran on a device: its metadata
    lists devices, its collectives' backend runs on one, its host called a device's
    runtime (a phrase each); empty for a CPU-only run or a run with device events."""
    if view.on_device:
        return []
    seen = []
    devices = sorted({str(p.get("name", "")) for m in view.meta.values()
                      for p in (m.get("device_properties") or []) if isinstance(p, dict)} - {""})  # fmt: skip
    if devices:
        seen.append(f"its metadata lists {', '.join(devices)}")
    backends = sorted({str(m.get("backend") or "").lower() for m in view.meta.values()})
    used = [b for b in backends if any(d in b for d in DEVICE_BACKENDS)]
    if used:
        seen.append(f"its collectives' backend is {', '.join(used)}")
    if view.df is not None:
        from hpcprof_kit.traces.analyses.breakdown import text_test

        names = view.df["name"]
        calls = text_test(names, lambda s: s.str.contains(DEVICE_HOST_EVENTS, regex=True))
        if calls.any():
            first = sorted(set(names[calls].astype(str)))[:3]
            seen.append(f"its host recorded {int(calls.sum())} device calls: {', '.join(first)}")
    return seen


def device_events_missing(view: RunView) -> str | None:
    """Why a device rule, or a CPU twin of one, does not run on a trace that lost its
    device events (CUPTI's counter profiling, a device the profiler does not trace, a
    recording without the device's activity): the host's own signals would give CPU advice
    to a device run. None for a CPU-only run (:func:`device_use`)."""
    seen = device_use(view)
    if not seen:
        return None
    return (f"could not run: the run used a device ({'; '.join(seen)}), but the trace holds "
            "no device events (kernels, copies): they are missing, not absent; record them "
            "with the device's activity (ProfilerActivity.CUDA, or XPU, MTIA) and without "
            "CUPTI's counter profiling")  # fmt: skip


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


def share_rule(view: RunView, kind: str, column: str | pd.Series, min_ms: float = 0.05,
               floor: float | None = None):  # fmt: skip
    """The common test of a rule whose signal is time (ns) per (rank, step): per rank, the
    median share of its steps at or above the threshold and the median effect (ms per step)
    above ``min_ms`` and the run's noise. With ``floor`` (a share under the threshold), the
    share need only reach ``floor`` and the effect must beat the spread itself
    (:meth:`RunView.stands_out`). ``column`` names a signal, or is the time itself per
    (rank, step) (:func:`per_step_of`). Returns (value, effect_ms, ranks, steps) for the
    ranks that pass (value and effect: the largest of theirs), or None."""
    ns = view.per_step(column) if isinstance(column, str) else per_step_of(view, column)
    wall = view.rows.set_index(["rank", "step"])["wall_ns"].astype(float)
    share = (100.0 * ns / wall.where(wall > 0, np.nan)).dropna()
    if share.empty:
        return None
    least = RULES[kind].threshold if floor is None else floor
    noise = view.beats_noise if floor is None else view.stands_out
    ms = ns / 1e6
    per = share.groupby(level="rank").median()
    effect = ms.groupby(level="rank").median()
    hot = [int(r) for r, p, e in zip(per.index, per.to_numpy(), effect.reindex(per.index)
           .to_numpy(), strict=True) if p >= least and e >= min_ms and noise(float(e))]  # fmt: skip
    if not hot:
        return None
    mine = share[share.index.get_level_values("rank").isin(hot)]
    steps = sorted({int(s) for (_, s), v in mine.items() if v >= least and s >= 0})
    return float(per[hot].max()), float(effect[hot].max()), hot, steps


def per_step_of(view: RunView, values: pd.Series) -> pd.Series:
    """``values`` (indexed by rank and step) on the rows the rules read (:attr:`RunView.rows`),
    0 where it has none: what :meth:`RunView.per_step` gives of a signal, for a measure a rule
    takes from elsewhere."""
    index = view.rows.set_index(["rank", "step"]).index
    return values.reindex(index).fillna(0).astype(float)
