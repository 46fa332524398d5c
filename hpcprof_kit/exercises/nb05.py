"""Notebook 05 exercise: read your own eager-vs-compiled table and judge the difference.

The learner sees the step times of both runs as a :func:`hpcprof_kit.comparison.compare_variants`
table (median, p10, p90, spread) and answers ``"faster"``, ``"slower"`` or ``"within noise"``
for the compiled run; the answer is checked against the same rule that ``noise_verdict`` applies
to the learner's own numbers.

>>> from hpcprof_kit.comparison import compare_variants
>>> table = compare_variants({"eager": [50, 40, 61, 55], "compiled": [48, 52, 39, 58]})
>>> check_compiled_verdict("faster", table)  # doctest: +ELLIPSIS
Not yet. Hint: Look at the p10 and p90 columns ...
False
>>> check_compiled_verdict("within noise", table)  # doctest: +ELLIPSIS
Correct - compiled vs eager: within noise (median ...
True
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hpcprof_kit.exercises import feedback

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

CHOICES = ("faster", "slower", "within noise")
HINT = (
    "Look at the p10 and p90 columns of both rows: each p10-p90 range holds the middle 80 % of "
    "that run's steps. If the two ranges overlap, you cannot tell the runs apart; if they are "
    "apart, the run with the lower median is the faster one."
)


def check_compiled_verdict(
    answer: str | None, table: pd.DataFrame, variant: str = "compiled"
) -> bool:
    """Is ``variant`` (against the table's baseline) ``"faster"``, ``"slower"`` or ``"within
    noise"``? Checked against :func:`hpcprof_kit.comparison.difference` on the same table."""
    from hpcprof_kit.comparison import difference, noise_verdict

    given = str(answer).strip().lower() if answer is not None else None
    if given not in CHOICES:
        return feedback(False, hint=f"answer one of {list(CHOICES)}. {HINT}")
    right = difference(table, variant)
    sentence = next(s for s in noise_verdict(table).splitlines() if variant in s)
    return feedback(given == right, hint=HINT, well_done=f"Correct - {sentence}")


# Slices around code Inductor generated: the graph's call, and its autograd function (forward
# and backward). "Torch-Compiled Region" is not one of them: it spans the frame Dynamo took over,
# and when DDP's forward breaks the graph the model runs eagerly inside it.
COMPILED_CODE = r"^## Call CompiledFxGraph|^CompiledFunction(?:Backward)?$"


def compiled_or_eager(df: pd.DataFrame, ops: tuple[str, ...] = ("aten::linear", "aten::mm",
                      "aten::addmm", "aten::scaled_dot_product_attention")) -> pd.DataFrame:  # fmt: skip
    """Per op: calls per recorded step and rank that ran inside code Inductor compiled (a
    ``## Call CompiledFxGraph`` or ``CompiledFunction`` slice on the same rank and thread) and
    outside it (eager).

    >>> import pandas as pd
    >>> rows = [("## Call CompiledFxGraph f1 ##", 0, 100), ("aten::mm", 10, 5),
    ...         ("Torch-Compiled Region: 0/0", 150, 100), ("aten::mm", 200, 5)]
    >>> df = pd.DataFrame([{"rank": 0, "tid": 1, "name": n, "ts_ns": t, "dur_ns": d, "step": 2}
    ...                    for n, t, d in rows])
    >>> compiled_or_eager(df, ops=("aten::mm", "aten::linear"))  # doctest: +NORMALIZE_WHITESPACE
                  compiled  eager
    op
    aten::mm           1.0    1.0
    aten::linear       0.0    0.0
    """
    import pandas as pd

    names = df["name"].astype(str)
    recorded = df[df["step"] >= 0]
    per_step = max(recorded[["rank", "step"]].drop_duplicates().shape[0], 1)
    graphs = df[names.str.contains(COMPILED_CODE, regex=True)]
    spans = {key: sorted(zip(g["ts_ns"], g["ts_ns"] + g["dur_ns"], strict=True))
             for key, g in graphs.groupby(["rank", "tid"], observed=True)}  # fmt: skip
    rows = []
    for op in ops:
        calls = recorded[names.loc[recorded.index] == op]
        inside = 0
        for rank, tid, start, dur in calls[["rank", "tid", "ts_ns", "dur_ns"]].itertuples(
            index=False
        ):
            inside += any(a <= start and start + dur <= b for a, b in spans.get((rank, tid), ()))
        rows.append({"op": op, "compiled": inside / per_step,
                     "eager": (len(calls) - inside) / per_step})  # fmt: skip
    return pd.DataFrame(rows).set_index("op")


def _same_name_truth(trace, name: str) -> tuple[int, float]:
    """Count and total ms of the slices called ``name`` in the file ``trace``, by ``same_name``
    on the file itself (the one the learner opened in Perfetto)."""
    import warnings

    from hpcprof_kit.traces import load, same_name

    with warnings.catch_warnings():  # a merged file names no rank: it is one, as Perfetto sees it
        warnings.simplefilter("ignore")
        row = same_name(load(trace), name).loc["all"]
    return int(row["count"]), float(row["total_ms"])


def check_same_name_query(count, total_ms, trace, name: str = "aten::linear") -> bool:
    """Check the count and total (ms) that the learner's Perfetto query of the slices called
    ``name`` gave on ``trace``, against the kit's ``same_name`` on the same file (offline). The
    total may differ by rounding (1 %, or 0.01 ms); Perfetto drops a slice it cannot nest, so
    a count 1 % off is taken and said.

    >>> import tempfile, pathlib
    >>> from hpcprof_kit.traces import merge_to_chrome
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "merged.json"
    >>> trace = merge_to_chrome("tests/fixtures/traces/ddp_cpu_2rank", out)  # doctest: +SKIP
    >>> check_same_name_query(None, None, trace)  # doctest: +SKIP
    Not yet. Hint: type the two numbers your query gave: ...
    False
    """
    query = ("in Perfetto's Query (SQL) page, the slice table has one row per slice, with its "
             "name and its dur in nanoseconds: count the rows with this name and sum their dur")  # fmt: skip
    if count is None or total_ms is None:
        return feedback(False, hint=f"type the two numbers your query gave: {query}.")
    try:
        count, total_ms = int(count), float(total_ms)
    except (TypeError, ValueError):
        return feedback(
            False, hint=f"count is a whole number and total_ms a number of ms; {query}."
        )
    right_count, right_total = _same_name_truth(trace, name)
    count_ok = abs(count - right_count) <= right_count // 100
    total_ok = abs(total_ms - right_total) <= max(0.01 * right_total, 0.01)
    if count_ok and not total_ok and abs(total_ms / 1e6 - right_total) <= 0.01 * right_total:
        return feedback(False, hint="the count agrees; the total looks like nanoseconds: "
                        "Perfetto's dur is in ns, and 1 ms is 1e6 ns.")  # fmt: skip
    if count_ok and not total_ok and abs(total_ms / 1e3 - right_total) <= 0.01 * right_total:
        return feedback(False, hint="the count agrees; the total looks like microseconds: "
                        "Perfetto's dur is in ns, and 1 ms is 1e6 ns.")  # fmt: skip
    said = "" if count == right_count else " (Perfetto left out a slice it could not nest)"
    return feedback(
        count_ok and total_ok,
        hint=f"{'the count agrees, ' if count_ok else ''}{'the total agrees, ' if total_ok else ''}"
        f"the query's numbers are not the file's: {query}; name = '{name}' exactly, and "
        f"{Path(str(trace)).name} is the file to open.",
        well_done=f"Correct - Perfetto and same_name agree on {Path(str(trace)).name}: the "
        f"slices called {name}{said}.",
    )
