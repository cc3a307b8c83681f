"""The reusable Rust kernels exposed in clusterlab._core (the parallel miners build on them)."""

import itertools

import numpy as np
import pytest

from clusterlab import _core


def csr(sets):
    offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(s) for s in sets])
    return offsets, np.asarray([x for s in sets for x in s], dtype=np.uint32)


def lists(offsets, items):
    return [items[offsets[k]:offsets[k + 1]].tolist() for k in range(len(offsets) - 1)]


BASKETS = [[1, 2, 3], [1, 2], [2, 3, 4], [1, 2, 3, 4], [2, 4]]


def brute(baskets, k):
    items = sorted({x for t in baskets for x in t})
    return {c: sum(set(c) <= set(t) for t in baskets) for c in itertools.combinations(items, k)}


def test_apriori_gen_joins_and_prunes():
    o, i = _core.apriori_gen(*csr([[1, 2], [1, 3], [2, 3], [2, 4]]))
    assert lists(o, i) == [[1, 2, 3]]  # {2,3,4} lacks {3,4}; {1,2,4} lacks {1,4}
    o, i = _core.apriori_gen(*csr([[3], [1], [2]]))
    assert lists(o, i) == [[1, 2], [1, 3], [2, 3]]
    with pytest.raises(ValueError, match="one length"):
        _core.apriori_gen(*csr([[1], [1, 2]]))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_count_candidates_matches_brute_force(k):
    want = brute(BASKETS, k)
    cands = list(want)[::-1]  # any order
    got = _core.count_candidates(*csr(BASKETS), *csr(cands))
    assert got.dtype == np.uint64
    assert got.tolist() == [want[c] for c in cands]


def test_count_candidates_weighted():
    w = np.array([2, 1, 1, 3, 1], dtype=np.uint64)
    got = _core.count_candidates(*csr(BASKETS), *csr([[1, 2], [2, 4]]), weights=w)
    assert got.tolist() == [2 + 1 + 3, 1 + 3 + 1]


def test_fpgrowth_weighted_equals_repeated():
    w = np.array([2, 1, 1, 3, 1], dtype=np.uint64)
    repeated = [t for t, n in zip(BASKETS, w, strict=True) for _ in range(n)]
    a = _core.fpgrowth(*csr(BASKETS), 3, weights=w)
    b = _core.fpgrowth(*csr(repeated), 3)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x, y)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="offsets"):
        _core.fpgrowth(np.array([0, 5], dtype=np.int64), np.array([1], dtype=np.uint32), 1)
    with pytest.raises(ValueError, match="not sorted"):
        _core.fpgrowth(*csr([[2, 1]]), 1)
    with pytest.raises(ValueError, match="weights"):
        _core.fpgrowth(*csr(BASKETS), 1, weights=np.ones(2, dtype=np.uint64))
