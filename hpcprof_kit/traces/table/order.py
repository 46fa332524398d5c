"""The order of rows in every table the kit prints: by value, then by name.

Sorting on a value alone leaves tied rows (two kernels at 6.448 ms) in whatever order the input
or the library version gave them, so a table would change between runs of the same traces.
Here ties are always broken by the row's name (and then by any further key columns).

>>> import pandas as pd
>>> t = pd.DataFrame({"self_ms": [1.0, 2.0, 1.0]}, index=pd.Index(["b", "c", "a"], name="op"))
>>> list(by_value(t, "self_ms").index)
['c', 'a', 'b']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def _names(table: pd.DataFrame, names: tuple[str, ...]) -> list[np.ndarray]:
    """Tie-breaking keys as text, first key first: the named columns, else the index."""
    if not names:
        return [np.asarray(table.index.astype(str), dtype=object)]
    return [np.asarray(table[c].astype(str), dtype=object) for c in names]


def by_value(
    table: pd.DataFrame,
    column: str,
    *,
    descending: bool = True,
    magnitude: bool = False,
    names: tuple[str, ...] = (),
) -> pd.DataFrame:
    """``table`` ordered by ``column`` (largest first unless ``descending=False``; by absolute
    value with ``magnitude=True``), ties by ``names`` (columns, as text) or else the index.

    Missing values go last, as pandas puts them.
    """
    values = table[column].to_numpy(dtype=float)
    if magnitude:
        values = np.abs(values)
    key = np.where(np.isnan(values), np.inf, -values if descending else values)
    text = _names(table, names)
    # np.lexsort sorts by the last key first; text keys are ranked through their sorted order
    ranks = [np.unique(t, return_inverse=True)[1] for t in text]
    order = np.lexsort((*reversed(ranks), key))
    return table.iloc[order]
