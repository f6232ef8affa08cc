"""Whether two stores hold the same networks at the rows compared, whatever their attributes.

Equal digests say two stores are one (same metadata, same chunks); a store whose weights were
copied under other attributes (another experiment name, a method recorded by hand) has
another digest and the same networks. The layer-wise MMD (`symbnn.mmd.layerwise`) compares
such stores by their values: one row of the smallest shared state entry first (a different
store almost always differs there, for the price of a chunk of each), and every shared entry
row block by row block only when that row is equal.
"""

from __future__ import annotations

import math

import numpy as np

from symbnn.store.reader import Store

BLOCK_BYTES = 64 * 2**20  # rows of one entry compared at once, about this many bytes a store


def _rows(store: Store, rows: slice | np.ndarray | None) -> np.ndarray:
    """The sample indices selected: a slice (None: every row) or an array of indices."""
    return np.arange(store.n_samples)[rows if rows is not None else slice(None)]


def _read_rows(store: Store, name: str, index: np.ndarray) -> np.ndarray:
    # a contiguous run reads as a slice (whole chunks); scattered rows by orthogonal indexing
    if index.size and np.array_equal(index, np.arange(index[0], index[0] + index.size)):
        return store.read(name, slice(int(index[0]), int(index[0]) + index.size))
    return store._read("state", name, index, oindex=True)


def shared_entries(a: Store, b: Store) -> list[str]:
    """State entries both stores hold with the same per-sample shape, smallest first."""
    names = [n for n in a.state_names if n in b.state_names and a.shape(n) == b.shape(n)]
    return sorted(names, key=lambda name: math.prod(a.shape(name)))


def _equal(a: Store, b: Store, name: str, rows_a: np.ndarray, rows_b: np.ndarray) -> bool:
    per_sample = max(1, math.prod(a.shape(name)) * a.layout("state", name).itemsize)
    step = max(1, BLOCK_BYTES // per_sample)
    for offset in range(0, len(rows_a), step):
        part_a, part_b = rows_a[offset : offset + step], rows_b[offset : offset + step]
        if not np.array_equal(_read_rows(a, name, part_a), _read_rows(b, name, part_b)):
            return False
    return True


def same_networks(
    a: Store, b: Store, rows_a: slice | np.ndarray | None, rows_b: slice | np.ndarray | None
) -> bool:
    """Whether every state entry the stores share holds equal values, row for row, at
    ``rows_a`` of ``a`` and ``rows_b`` of ``b`` (slices or index arrays, None: every row)."""
    ra, rb = _rows(a, rows_a), _rows(b, rows_b)
    names = shared_entries(a, b)
    if not names or len(ra) != len(rb) or not len(ra):
        return False
    probe = names[0]
    if not np.array_equal(a.read(probe, int(ra[0])), b.read(probe, int(rb[0]))):
        return False
    return all(_equal(a, b, name, ra, rb) for name in names)
