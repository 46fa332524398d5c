"""The run prepared once for a report (:class:`RunView`): its steps, the device's activity, the
host's waits and the arguments the rules read, built from the trace table or from the per-rank
summaries of an ``--mpi`` report, and read by every pane and every rule; with the run's own
noise (step to step), against which every rule tests its effect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from hpcprof_kit.traces.view.signals import rows_by_rank
from hpcprof_kit.traces.view.slower import slower_of_medians, slower_than_others

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hpcprof_kit.traces.view.summary import RunSummary

# A rule fires only when its effect (ms per step) beats this many times the run's own spread.
NOISE_TIMES = 3.0
# A last step shorter than this share of the rank's median step was cut off by the profiler.
TRUNCATED_SHARE = 0.5
CUT_OF_TWO = 0.1  # of two steps, a second under a tenth of the first was cut, not warmed up


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
    """A run prepared once for a report: every pane and every rule reads it, and nothing
    prepares the run again. ``b`` is the step breakdown
    (:func:`~hpcprof_kit.traces.analyses.breakdown.step_breakdown`), ``steps`` the rank x step
    table (``rank_steps``), ``sig`` the per-rank-and-step signals
    (:func:`~hpcprof_kit.traces.view.signals.signals`), ``meta`` the per-rank metadata; when
    the trace table is at hand, ``df`` is it without its metadata, ``table`` it as loaded (its
    metadata names the files ``[memory]`` events are read from), ``gaps`` the host's waits
    (:func:`~hpcprof_kit.traces.view.signals.sync_gaps`) and :attr:`idle` the device's idle
    time by cause. ``waits`` are the device-to-host copies the host waited for
    (:func:`~hpcprof_kit.traces.view.signals.copy_waits`), from the table or the summaries;
    ``spans`` the summaries' start-up of each rank (:attr:`startup`). A report of per-rank summaries (``--mpi``) has no table: ``slower(rank)``
    stands in for the straggler's kernels. Rules leave their findings in ``found`` (later
    rules read them) and the reasons a rule could not run in ``coverage``.

    >>> import json, tempfile, pathlib
    >>> from hpcprof_kit import traces
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t-0-of-1.json"
    >>> _ = p.write_text(json.dumps({"traceEvents": [
    ...     {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1,
    ...      "ts": 0, "dur": 100}, {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,
    ...      "tid": 1, "ts": 10, "dur": 50}]}))
    >>> view = RunView.of(traces.load(p, cache=False))
    >>> view.b[["rank", "step"]].values.tolist(), view.steps.index.tolist(), view.df.attrs
    ([[0, 3]], [3], {})
    """

    b: pd.DataFrame
    steps: pd.DataFrame
    sig: pd.DataFrame
    meta: dict
    df: pd.DataFrame | None = None
    table: pd.DataFrame | None = None
    gaps: pd.DataFrame | None = None
    slower: Callable[[int], list[dict]] | None = None
    waits: pd.DataFrame | None = None
    spans: pd.DataFrame | None = None
    found: dict[str, list[dict]] = field(default_factory=dict)
    coverage: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, table: pd.DataFrame) -> RunView:
        """The view of a trace table (``load``'s), each part computed once."""
        from hpcprof_kit.traces.analyses.breakdown import bare, rank_steps, step_breakdown
        from hpcprof_kit.traces.view.signals import copy_waits, signals, sync_gaps

        meta = table.attrs.get("ranks", {})
        df = bare(table)  # the analyses need no metadata: pandas would copy it at every step
        b = step_breakdown(df)
        gaps = sync_gaps(df)
        waits = copy_waits(df, gaps)
        sig = signals(df, gaps, meta, waits=waits)
        return cls(b, rank_steps(b), sig, meta, df, table, gaps, waits=waits)

    @classmethod
    def of_summary(cls, run: RunSummary) -> RunView:
        """The view of a run's per-rank summaries (what ``--mpi`` gathers): the same
        breakdown, rank x step table and signals, no events."""
        import pandas as pd

        from hpcprof_kit.traces.view.signals import SIGNAL_COLUMNS, WAIT_COLUMNS

        sig = run.signals if run.signals is not None else pd.DataFrame(columns=SIGNAL_COLUMNS)
        waits = run.waits if run.waits is not None else pd.DataFrame(columns=WAIT_COLUMNS)
        same, medians = run.same_name, run.medians

        def slower(rank: int) -> list[dict]:
            if medians is not None and len(medians):  # every name's median, as the table's
                return slower_of_medians(medians, rank)
            if same.empty:  # a summary of an older kit: its top names alone
                return []
            med = same.pivot_table(index="name", columns="rank", values="median_us")
            return slower_than_others(med, rank)

        return cls(run.breakdown, run.steps, sig, run.ranks, slower=slower, waits=waits,
                   spans=run.startup)  # fmt: skip

    @cached_property
    def startup(self) -> pd.DataFrame | None:
        """On a trace without steps, each rank's start-up and steady state, by rank
        (:func:`~hpcprof_kit.traces.view.startup.startup_spans`: from the events, else from
        the per-rank summaries); None when the run has steps or neither is at hand."""
        from hpcprof_kit.traces.view.startup import startup_spans

        if self.stepped:
            return None
        if self.df is not None:
            return startup_spans(self.df)
        if self.spans is None:
            return None
        return self.spans.set_index("rank") if "rank" in self.spans else self.spans

    @cached_property
    def idle(self) -> pd.DataFrame | None:
        """Why the device sat idle, per rank and stream
        (:func:`~hpcprof_kit.traces.analyses.device_idle.idle_split`); None without a table."""
        from hpcprof_kit.traces.analyses.device_idle import idle_split

        return None if self.df is None else idle_split(self.df)

    @cached_property
    def time_lost(self):
        """The what-if account of the run
        (:func:`~hpcprof_kit.traces.view.time_lost.account`): made once, read by the rules
        and the report."""
        from hpcprof_kit.traces.view.time_lost import account

        return account(self)

    @cached_property
    def truncated(self) -> set[tuple[int, int]]:
        """(rank, step) of last steps cut short by the end of the recording: from three
        steps on, under ``TRUNCATED_SHARE`` of the median of the steps before it; of two, under
        ``CUT_OF_TWO`` of the first (which is often a warm-up, several times a steady step:
        a ROCm trace's 49 µs last step after a 9.3 ms first)."""
        out = set()
        for rank, steps, wall in rank_walls(self.b):
            if wall.size >= 3 and wall[-1] < TRUNCATED_SHARE * np.median(wall[:-1]):
                out.add((rank, int(steps[-1])))
            elif wall.size == 2 and wall[1] < CUT_OF_TWO * wall[0]:
                out.add((rank, int(steps[1])))
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
    def placement(self) -> dict | None:
        """Where each rank ran (``{"hosts", "ranks_per_node"}``, from the run directory the
        traces were loaded from: :mod:`~hpcprof_kit.traces.table.placement`); None when
        unknown."""
        return None if self.table is None else self.table.attrs.get("placement")

    @cached_property
    def op_ids(self) -> dict[int, dict[str, int]]:
        """Per rank, the ids of its host ops and the holes between them
        (:func:`~hpcprof_kit.traces.view.op_ids.op_id_holes`): from the events, else from
        each rank's summary (empty for a summary of an older kit)."""
        from hpcprof_kit.traces.view.op_ids import op_id_holes

        if self.df is not None:
            return op_id_holes(self.df)
        return {int(r): m["op_ids"] for r, m in self.meta.items() if m.get("op_ids")}

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
        rank's step wall times (ms), the first step and those a straggler, rotating straggler,
        slow steps or host stall finding explains set aside (unless that leaves a wider
        spread, as fewer steps can); 0 with fewer than three steps."""
        explained = frozenset(
            s
            for k in ("straggler", "rotating_straggler", "slow_steps", "host_stall")
            for f in self.found.get(k, [])
            for s in f["steps"]
        )
        if explained not in self._noise:  # asked by every rule's noise test: made once
            steady = self.rows[(self.rows["step"] >= 0) & ~self.rows["step"].isin(explained)]
            spreads = _rank_spreads(steady)
            noise = float(np.median(spreads)) if spreads else 0.0
            if explained:  # set aside to lower the floor, never to raise it (fewer steps left)
                every = self.rows[self.rows["step"] >= 0]
                spreads = _rank_spreads(every)
                noise = min(noise, float(np.median(spreads))) if spreads else noise
            self._noise[explained] = noise
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

    def per_step_text(self, column: str) -> pd.Series:
        """``sig[column]`` (a text column) per (rank, step) of :attr:`rows` ("" where the
        signals have none, or lack the column: a summary of an older kit)."""
        import pandas as pd

        if column not in self.sig:
            return pd.Series("", index=self._rows_index)
        return self._sig_by_step[column].reindex(self._rows_index).fillna("").astype(str)

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
