"""The binding experiment's torch.profiler traces, plan by plan: step time and the top ops.

The ATPESC guide ends its affinity exercise with "Profile the application with various bindings
on multiple ranks, and see whether the kernel launch or execution times get affected by them."
Each plan's job writes one trace per rank (``run_experiment(..., profile=True)``); these
functions put the plans side by side as DataFrames.

>>> from hpcprof_kit.affinity.profiles import compare_profiles                # doctest: +SKIP
>>> compare_profiles({"core": "runs/bind-core/traces", "none": "runs/bind-none/traces"})  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from hpcprof_kit.errors import BindingError, KitError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

Runs = Mapping[str, "str | os.PathLike[str] | pd.DataFrame"]
STEP_COLUMNS = ["plan", "rank", "steps", "median_step_ms", "max_step_ms"]


def _tables(runs: Runs) -> dict[str, pd.DataFrame]:
    """Each plan's trace table (a run directory, a traces folder, or a loaded table)."""
    import pandas as pd

    from hpcprof_kit import traces

    if not runs:
        raise BindingError("no plans to compare; pass {plan name: its run directory or traces}")
    tables = {}
    for plan, where in runs.items():
        if isinstance(where, pd.DataFrame):
            tables[plan] = where
            continue
        folder = Path(where) / "traces"  # a job's run directory: its traces/ folder
        try:
            tables[plan] = traces.load(folder if folder.is_dir() else where)
        except KitError as exc:
            raise BindingError(
                f"plan {plan!r} has no traces to compare ({exc}); run the experiment with "
                "profile=True"
            ) from None
    return tables


def plan_steps(runs: Runs) -> pd.DataFrame:
    """One row per plan and rank: recorded steps, median and slowest step (ms), from the
    ``ProfilerStep#N`` spans of the traces.

    >>> plan_steps({"core": "runs/bind-core"})   # doctest: +SKIP
    """
    import pandas as pd

    from hpcprof_kit.traces.analyses.breakdown import step_spans

    frames = []
    for plan, df in _tables(runs).items():
        ms = step_spans(df).assign(ms=lambda t: t["wall_ns"] / 1e6).groupby("rank")["ms"]
        frames.append(
            pd.DataFrame(
                {"steps": ms.size(), "median_step_ms": ms.median(), "max_step_ms": ms.max()}
            )
            .reset_index()
            .assign(plan=plan)  # fmt: skip
        )
    return pd.concat(frames, ignore_index=True)[STEP_COLUMNS]


def plan_ops(runs: Runs, n: int = 5) -> pd.DataFrame:
    """One row per plan and name among that plan's ``n`` costliest host ops (and device kernels
    when the trace has them): ``kind``, ``self_ms_per_step`` (self time per recorded step and
    rank) and ``share`` of the plan's op (or kernel) time.

    >>> plan_ops({"core": "runs/bind-core"}, n=3)   # doctest: +SKIP
    """
    import pandas as pd

    from hpcprof_kit import traces
    from hpcprof_kit.traces.analyses.breakdown import step_spans

    frames = []
    for plan, df in _tables(runs).items():
        steps = max(len(step_spans(df)), 1)  # recorded steps, all ranks together
        parts = [("op", traces.top_ops(df, n))]
        if (df["device"].to_numpy() >= 0).any():
            parts.append(("kernel", traces.top_kernels(df, n)))
        for kind, top in parts:
            frames.append(
                pd.DataFrame(
                    {
                        "plan": plan,
                        "kind": kind,
                        "name": top.index.astype(str),
                        "self_ms_per_step": top["self_ms"].to_numpy() / steps,
                        "share": top["share"].to_numpy(),
                    }
                )  # fmt: skip
            )
    return pd.concat(frames, ignore_index=True)


def compare_profiles(runs: Runs, n: int = 5) -> pd.DataFrame:
    """One row per plan: ranks, recorded steps per rank, median and slowest step (ms), the
    slowest rank, then one column per op among any plan's top ``n`` (self ms per step and rank; 0 where a
    plan never ran it). Read across a column to see which binding slows which op down.

    >>> compare_profiles({"core": "runs/bind-core", "none": "runs/bind-none"})   # doctest: +SKIP
    """
    tables = _tables(runs)
    steps = plan_steps(tables)
    by_plan = steps.groupby("plan", sort=False)
    out = by_plan.agg(ranks=("rank", "nunique"), steps=("steps", "max"),
                      median_step_ms=("median_step_ms", "median"),
                      max_step_ms=("max_step_ms", "max"))  # fmt: skip
    slowest = steps.loc[by_plan["median_step_ms"].idxmax(), ["plan", "rank"]]
    out["slowest_rank"] = slowest.set_index("plan")["rank"]
    ops = plan_ops(tables, n)
    wide = ops.pivot_table(index="plan", columns="name", values="self_ms_per_step", aggfunc="sum")
    # an op outside one plan's top n still ran there: take its time from that plan's trace
    for name in wide.columns:
        for plan in wide.index[wide[name].isna()]:
            wide.loc[plan, name] = _self_ms_per_step(tables[plan], name)
    order = wide.max().sort_values(ascending=False).index
    return out.join(wide[order]).rename_axis("plan").round(3)


def _self_ms_per_step(df: pd.DataFrame, name: str) -> float:
    """Self ms per recorded step of one op (or kernel) in one plan's table; 0 when it never ran."""
    from hpcprof_kit import traces
    from hpcprof_kit.traces.analyses.breakdown import step_spans

    steps = max(len(step_spans(df)), 1)
    for top in (traces.top_ops(df, 10**9), traces.top_kernels(df, 10**9)):
        if name in top.index:
            return float(top.loc[name, "self_ms"]) / steps
    return 0.0
