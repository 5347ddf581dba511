"""Ranking helpers of the deployment search, over arrays (pure numpy).

``rank_order`` sorts candidates by an objective; ``first_per_group`` keeps the best candidate of each
layout so the answer's top-k differ in a way that matters; ``pareto_front`` finds the candidates no other
beats on every axis at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

F = NDArray[np.float64]


def rank_order(primary: F, secondary: F, tertiary: F | None = None) -> NDArray[np.int64]:
    """Indices sorted by ``primary`` then ``secondary`` (then ``tertiary``), ascending; NaN sorts last."""
    keys = [np.nan_to_num(k, nan=np.inf) for k in (tertiary, secondary, primary) if k is not None]
    return np.lexsort(keys).astype(np.int64)


def first_per_group(order: NDArray[np.int64], group: NDArray[Any]) -> NDArray[np.int64]:
    """The first candidate of each group in ``order``, kept in that order."""
    _, first = np.unique(group[order], return_index=True)
    return order[np.sort(first)]


def pareto_front(minimise: F) -> NDArray[np.int64]:
    """Rows of ``minimise`` (n x k, every column to be minimised) that no other row dominates (no worse
    on every column and better on one). Rows are swept in lexicographic order, so a row can only be
    dominated by one before it, and (domination being transitive) only by one already on the front."""
    m = np.nan_to_num(minimise, nan=np.inf)
    order = np.lexsort(m.T[::-1])
    front: list[int] = []
    kept = np.empty((0, m.shape[1]))
    for i in order:
        row = m[i]
        if len(front) and ((kept <= row).all(axis=1) & (kept < row).any(axis=1)).any():
            continue
        if len(front) and (kept == row).all(axis=1).any():
            continue                                    # an exact tie with a kept row adds nothing
        front.append(int(i))
        kept = np.vstack([kept, row])
    return np.asarray(sorted(front), dtype=np.int64)
