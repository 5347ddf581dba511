"""The search's helpers against their definitions, written out the slow way."""

from __future__ import annotations

import numpy as np
import pytest

from service.core.ranking import _sweep, best_per_group, first_per_group, pareto_front, rank_order, warm_up


def pareto_by_definition(minimise: np.ndarray) -> np.ndarray:
    """Rows no other row dominates (no worse on every column, better on one); of equal rows, the first.
    NaN counts as worst, as in ``pareto_front``. O(n^2)."""
    m = np.nan_to_num(minimise, nan=np.inf)
    keep = []
    for i in range(len(m)):
        dominated = ((m <= m[i]).all(axis=1) & (m < m[i]).any(axis=1)).any()
        repeated = (m[:i] == m[i]).all(axis=1).any()
        if not (dominated or repeated):
            keep.append(i)
    return np.asarray(keep, dtype=np.int64)


def random_rows(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """Rows with many ties (few distinct values per column) and some NaN, +-inf and signed zeros."""
    if rng.random() < 0.5:
        m = rng.integers(0, int(rng.integers(1, 5)), size=(n, k)).astype(np.float64)
    else:
        m = rng.random((n, k))
        m[:, -1] = -m[:, 0] + 0.1 * rng.random(n)        # anti-correlated: a large front
    special = rng.random((n, k)) < 0.1
    m[special] = rng.choice([np.nan, np.inf, -np.inf, -0.0, 0.0], size=int(special.sum()))
    return m


@pytest.mark.parametrize("seed", range(20))
def test_pareto_front_is_the_set_no_row_dominates(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(20):
        m = random_rows(rng, int(rng.integers(0, 300)), int(rng.integers(1, 5)))
        got = pareto_front(m)
        assert got.dtype == np.int64
        assert np.array_equal(got, pareto_by_definition(m))


def test_pareto_front_small_cases() -> None:
    inf, nan = np.inf, np.nan
    assert np.array_equal(pareto_front(np.array([[1.0, 2.0], [1.0, 2.0], [2.0, 1.0]])), [0, 2])
    assert np.array_equal(pareto_front(np.array([[nan, 1.0], [inf, 1.0], [5.0, 1.0]])), [2])
    assert np.array_equal(pareto_front(np.array([[nan, 0.0], [inf, 1.0]])), [0, 1])
    assert np.array_equal(pareto_front(np.zeros((0, 4))), np.zeros(0, dtype=np.int64))


@pytest.mark.parametrize("seed", range(10))
def test_first_per_group_keeps_each_groups_first_in_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(50):
        n = int(rng.integers(0, 400))
        group = rng.integers(-3 if rng.random() < 0.2 else 0, int(rng.integers(1, 3000)), n + 5)
        if rng.random() < 0.2:
            group = group.astype(np.float64)
        order = rng.permutation(n + 5)[:n].astype(np.int64)
        seen: set[float] = set()
        want = []
        for i in order:
            if group[i] not in seen:
                seen.add(group[i])
                want.append(i)
        assert np.array_equal(first_per_group(order, group), np.asarray(want, dtype=np.int64))


@pytest.mark.parametrize("seed", range(6))
def test_best_per_group_is_the_first_of_each_group_in_the_full_ranking(seed: int) -> None:
    # the answer takes each layout's best without sorting every feasible candidate: it must be exactly the
    # first of each group in the full ranking (ties, NaN keys, groups whose keys are all NaN)
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n = int(rng.integers(0, 500))
        group = rng.integers(0, int(rng.integers(1, 80)), n)
        if rng.random() < 0.3:
            group = group * 1000 - 7          # sparse and negative ids
        keys = [np.round(rng.random(n) * rng.choice([3, 50]), 1) for _ in range(3)]
        for k in keys:
            k[rng.random(n) < 0.1] = np.nan
        keys[0][np.isin(group, group[:1])] = np.nan
        tertiary = keys[2] if rng.random() < 0.7 else None
        want = first_per_group(rank_order(keys[0], keys[1], tertiary), group)
        assert np.array_equal(best_per_group(group, keys[0], keys[1], tertiary), want)


def test_the_pareto_sweep_is_compiled_once() -> None:
    # another argument type (a non-contiguous or read-only matrix) would compile the sweep again in a request
    warm_up()
    for n in (0, 1, 50):
        pareto_front(np.random.default_rng(n).random((n, 4)))
    assert len(_sweep.signatures) == 1
