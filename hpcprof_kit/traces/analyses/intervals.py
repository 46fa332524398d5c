"""Interval arithmetic on integer nanoseconds: unions, measures inside a window.

Every breakdown in the kit is built from these few operations, so overlapping events (nested
ops, concurrent streams) are never counted twice.

>>> import numpy as np
>>> s, e = union(np.array([0, 5, 20]), np.array([10, 12, 30]))
>>> s.tolist(), e.tolist()
([0, 20], [12, 30])
>>> measure(s, e, 8, 25)
9
"""

from __future__ import annotations

import numpy as np


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge intervals ``[start, end)`` into sorted, disjoint ones (touching ones are joined).

    >>> [a.tolist() for a in union(np.array([3, 0]), np.array([4, 3]))]
    [[0], [4]]
    """
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    keep = ends > starts  # zero-length events take no time
    starts, ends = starts[keep], ends[keep]
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    # a new merged interval begins where an event starts after everything before it ended
    new = np.empty(starts.size, dtype=bool)
    new[0] = True
    new[1:] = starts[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, starts.size - 1)
    return starts[first], reach[last]


def union_of(*parts: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Union of several interval sets given as ``(starts, ends)`` pairs."""
    if not parts:
        empty = np.array([], dtype=np.int64)
        return empty, empty
    return union(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def measure(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> int:
    """Total length of disjoint sorted intervals clipped to the window ``[lo, hi)``."""
    if hi <= lo or starts.size == 0:
        return 0
    i0 = int(np.searchsorted(ends, lo, side="right"))
    i1 = int(np.searchsorted(starts, hi, side="left"))
    if i1 <= i0:
        return 0
    s = np.clip(starts[i0:i1], lo, hi)
    e = np.clip(ends[i0:i1], lo, hi)
    return int((e - s).sum())


def measure_each(
    starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """:func:`measure` of many windows ``[lo[i], hi[i])`` at once (0 where ``hi <= lo``).

    >>> measure_each(np.array([0, 20]), np.array([12, 30]), np.array([8, 0, 5]), np.array([25, 40, 5])).tolist()
    [9, 22, 0]
    """
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    if starts.size == 0:
        return np.zeros(lo.shape, dtype=np.int64)
    # covered length before each point: whole intervals before it plus the one it falls in
    before = np.concatenate([[0], np.cumsum(ends - starts)])

    def covered_to(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(starts, x, side="right")
        inside = np.clip(x - starts[np.maximum(i - 1, 0)], 0, (ends - starts)[np.maximum(i - 1, 0)])
        return before[np.maximum(i - 1, 0)] + np.where(i > 0, inside, 0)

    return np.where(hi > lo, covered_to(hi) - covered_to(lo), 0)


def subtract(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """``a`` minus ``b`` for disjoint sorted interval sets (result disjoint and sorted).

    >>> a = (np.array([0]), np.array([10])); b = (np.array([2, 6]), np.array([4, 7]))
    >>> [x.tolist() for x in subtract(a, b)]
    [[0, 4, 7], [2, 6, 10]]
    """
    a_s, a_e = a
    b_s, b_e = b
    if a_s.size == 0 or b_s.size == 0:
        return a_s, a_e
    # boundaries of a and b, swept once: inside a and outside b
    points = np.unique(np.concatenate([a_s, a_e, b_s, b_e]))
    mids = points[:-1]
    in_a = np.searchsorted(a_s, mids, side="right") - 1
    in_a = (in_a >= 0) & (mids < a_e[np.clip(in_a, 0, None)])
    in_b = np.searchsorted(b_s, mids, side="right") - 1
    in_b = (in_b >= 0) & (mids < b_e[np.clip(in_b, 0, None)])
    keep = in_a & ~in_b
    return union(points[:-1][keep], points[1:][keep])
