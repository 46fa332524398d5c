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
    return slower_of_medians(name_medians(df), rank, top)


MEDIAN_COLUMNS = ["name", "rank", "median_us", "kernel"]


def name_medians(df: pd.DataFrame) -> pd.DataFrame:
    """Per name and rank, the median duration (µs) of its kernels, or, on a trace without
    kernels, of its ops (``kernel`` False): what :func:`slower_names` compares, small
    enough to keep in a rank's summary."""
    import pandas as pd

    df = bare(df)
    kernels = text_test(df["track"], lambda s: s == "gpu") & (df["device"].to_numpy() >= 0)
    rows = kernels if kernels.any() else text_test(df["cat"], lambda s: s == "cpu_op")
    sub = df[rows & (df["dur_ns"].to_numpy() > 0)]
    if sub.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in zip(MEDIAN_COLUMNS,
                             (str, "int64", float, bool), strict=True)})  # fmt: skip
    med = sub.groupby([sub["name"].astype(str), sub["rank"]], observed=True)["dur_ns"].median()
    out = med.rename("median_us").reset_index()
    out["median_us"] = out["median_us"] / 1e3
    out["kernel"] = bool(kernels.any())
    return out.astype({"name": str, "rank": "int64"})[MEDIAN_COLUMNS]


def slower_of_medians(medians: pd.DataFrame, rank: int, top: int = 3) -> list[dict[str, Any]]:
    """:func:`slower_than_others` of :func:`name_medians` rows (one rank's or several's
    stacked): the kernels' when any rank has kernels, else the ops'."""
    if medians.empty:
        return []
    if medians["kernel"].any():
        medians = medians[medians["kernel"].to_numpy(dtype=bool)]
    table = medians.pivot_table(index="name", columns="rank", values="median_us")
    return slower_than_others(table, rank, top)


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
