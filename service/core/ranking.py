"""Ranking helpers of the deployment search, over arrays (numpy; the Pareto sweep compiled by numba).

``rank_order`` sorts candidates by an objective; ``first_per_group`` keeps the best candidate of each
layout so the answer's top-k differ in a way that matters; ``pareto_front`` finds the candidates no other
beats on every axis at once.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

from service.core.types import F

# ``first_per_group`` indexes group ids directly (no sort) when they are non-negative integers below this
# many per row: the table it fills then stays within a small multiple of the rows.
DENSE_GROUPS_PER_ROW = 4


def rank_order(primary: F, secondary: F, tertiary: F | None = None) -> NDArray[np.int64]:
    """Indices sorted by ``primary`` then ``secondary`` (then ``tertiary``), ascending; NaN sorts last."""
    keys = [np.nan_to_num(k, nan=np.inf) for k in (tertiary, secondary, primary) if k is not None]
    return np.lexsort(keys).astype(np.int64)


def group_ids(group: NDArray[Any]) -> tuple[NDArray[np.int64], int]:
    """Each row's group as an index below the returned count: small non-negative ids (layout indices) as they
    are, others by their rank among the distinct ids."""
    if len(group) and group.dtype.kind in "iu" and group.min() >= 0 \
            and group.max() <= DENSE_GROUPS_PER_ROW * len(group):
        return group.astype(np.int64, copy=False), int(group.max()) + 1
    ids, of = np.unique(group, return_inverse=True)
    return of.reshape(-1).astype(np.int64, copy=False), len(ids)


def first_per_group(order: NDArray[np.int64], group: NDArray[Any]) -> NDArray[np.int64]:
    """The first candidate of each group in ``order``, kept in that order."""
    of, n_groups = group_ids(group[order])
    first = np.full(n_groups, len(of))
    np.minimum.at(first, of, np.arange(len(of)))        # each group's first position, by one pass
    return order[np.sort(first[first < len(of)])]


def best_per_group(group: NDArray[Any], primary: F, secondary: F, tertiary: F | None = None) -> NDArray[np.int64]:
    """``first_per_group(rank_order(primary, secondary, tertiary), group)`` without sorting every row: a
    group's first row in that order has the group's least primary key, of those the least secondary key, and
    so on, so only the rows that tie their group's least keys are sorted (NaN counts as worst, as in
    ``rank_order``; of rows equal on every key, the first, as ``rank_order``'s stable sort keeps them)."""
    of, n_groups = group_ids(group)
    keep = np.arange(len(group))
    for key in (primary, secondary, tertiary):
        if key is None:
            continue
        k = np.nan_to_num(key[keep], nan=np.inf)
        least = np.full(n_groups, np.inf)
        np.minimum.at(least, of[keep], k)
        keep = keep[k == least[of[keep]]]
    order = keep[rank_order(primary[keep], secondary[keep], None if tertiary is None else tertiary[keep])]
    return first_per_group(order, group)


def pareto_front(minimise: F) -> NDArray[np.int64]:
    """Rows of ``minimise`` (n x k, every column to be minimised; NaN counts as worst) that no other row
    dominates (no worse on every column and better on one); of rows equal on every column, the first.

    Rows are taken in lexicographic order, so a row can only be dominated by (or equal to) a row before it:
    a row is left out exactly when an earlier row is no worse on every column (that covers both cases), and
    then a row of the front before it is no worse too (the earlier row is on the front, or left out for a
    front row no worse than it). So one sweep in that order keeps a row when no front row so far is no
    worse on every column: O(n x front) comparisons at most, most rows dropped by the first few."""
    m = np.nan_to_num(minimise, nan=np.inf)
    order = np.lexsort(m.T[::-1])
    front = _sweep(np.ascontiguousarray(m[order]))
    return np.sort(order[front]).astype(np.int64)


@njit(cache=True, nogil=True)
def _sweep(m: F) -> NDArray[np.int64]:
    """``pareto_front``'s sweep over rows in lexicographic order: positions of the rows no earlier kept row is
    no worse than on every column."""
    n, k = m.shape
    front = np.empty(n, dtype=np.int64)
    kept = 0
    for i in range(n):
        covered = False
        for a in range(kept):
            r = front[a]
            no_worse = True
            for c in range(k):
                if m[r, c] > m[i, c]:
                    no_worse = False
                    break
            if no_worse:
                covered = True
                break
        if not covered:
            front[kept] = i
            kept += 1
    return front[:kept]


def warm_up() -> float:
    """Compile the Pareto sweep (or load it from numba's on-disk cache); seconds."""
    t0 = time.perf_counter()
    _sweep(np.zeros((2, 4)))
    return time.perf_counter() - t0
