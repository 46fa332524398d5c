"""The distinct values of a column of whole numbers, sorted: what ``np.unique`` returns, found
by sorting.

NumPy 2's ``np.unique`` hashes the values before it sorts the few it found; on the trace
table's columns (ranks, ids: a million rows) that costs 5-15x a plain sort, and the report
asks it a dozen times.

>>> distinct(np.array([3, 1, 3, 2, 1], dtype=np.int32))
array([1, 2, 3], dtype=int32)
>>> distinct(np.array([], dtype=np.int64))
array([], dtype=int64)
"""

from __future__ import annotations

from typing import Any

import numpy as np


def distinct(values: Any) -> np.ndarray:
    """``np.unique(values)`` for integers and booleans (flattened, sorted, same dtype); other
    kinds go to ``np.unique`` itself (NaN is one value there, never equal to itself here)."""
    a = np.asarray(values)
    if a.dtype.kind not in "biu":
        return np.unique(a)
    s = np.sort(a, axis=None)
    if s.size == 0:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
