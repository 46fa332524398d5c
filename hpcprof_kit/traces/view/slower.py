"""Which kernels run slower on one rank than on the others: from the trace table, or from the
same-name medians the per-rank summaries keep (``--mpi``). The straggler's evidence."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpcprof_kit.traces.analyses.breakdown import bare, text_test

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def slower_names(df: pd.DataFrame, rank: int, top: int = 3) -> list[dict[str, Any]]:
    """The kernels (or, on a CPU-only trace, the ops) that are slowest on ``rank`` against
    the median of the other ranks: ``name``, ``rank_median_us``, ``others_median_us``,
    ``ratio``; the ``top`` largest ratios above 1.1, each name seen on ``rank`` and others."""
    df = bare(df)
    kernels = text_test(df["track"], lambda s: s == "gpu") & (df["device"].to_numpy() >= 0)
    rows = kernels if kernels.any() else text_test(df["cat"], lambda s: s == "cpu_op")
    sub = df[rows & (df["dur_ns"].to_numpy() > 0)]
    if sub.empty:
        return []
    med = sub.groupby([sub["name"].astype(str), sub["rank"]], observed=True)["dur_ns"].median()
    return slower_than_others(med.unstack("rank") / 1e3, rank, top)


def slower_than_others(med_us: pd.DataFrame, rank: int, top: int = 3) -> list[dict[str, Any]]:
    """From a names x ranks table of median durations (µs): the ``top`` names whose median on
    ``rank`` is most above the other ranks' median (ratio above 1.1; ties by name)."""
    import pandas as pd

    if rank not in med_us.columns or med_us.shape[1] < 2:
        return []
    others = med_us.drop(columns=rank).median(axis=1)
    ratio = (med_us[rank] / others).dropna()
    ratio = ratio[ratio > 1.1]
    table = pd.DataFrame({"ratio": ratio.to_numpy(), "name": list(ratio.index)})
    table = table.sort_values(["ratio", "name"], ascending=[False, True])
    return [
        {
            "name": str(name),
            "rank_median_us": round(float(med_us.loc[name, rank]), 3),
            "others_median_us": round(float(others.loc[name]), 3),
            "ratio": round(float(r), 3),
        }
        for name, r in zip(table["name"].head(top), table["ratio"].head(top), strict=True)
    ]
