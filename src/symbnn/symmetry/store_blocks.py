"""Reading a weight store in blocks of whole samples for the symmetry steps.

Large networks are chunked along the sample axis in groups of rows (64 for ResNet-18); a read
of 5 samples would fetch (and discard) whole 64-row chunks for every layer. So reads are
aligned to the chunk rows of the largest array when such a read fits in ``read_bytes``, and
the rows read are handed out in blocks of at most ``block_bytes``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from symbnn.store import Store

DEFAULT_BLOCK_BYTES = 256 * 2**20
DEFAULT_READ_BYTES = 4 * 2**30


def _per_sample_bytes(store: Store, name: str) -> int:
    return math.prod(store.shape(name)) * store.state_array(name).dtype.itemsize


def iter_state_blocks(
    store: Store, block_bytes: int = DEFAULT_BLOCK_BYTES, read_bytes: int = DEFAULT_READ_BYTES
) -> Iterator[tuple[slice, dict[str, torch.Tensor]]]:
    """(rows, stacked state) over the store's samples, in order."""
    sizes = {name: _per_sample_bytes(store, name) for name in store.state_names}
    per_sample = max(1, sum(sizes.values()))
    rows_per_block = max(1, min(store.n_samples, block_bytes // per_sample))
    largest = max(sizes, key=sizes.get)
    chunk_rows = store.state_array(largest).chunks[0]
    if chunk_rows * per_sample <= read_bytes:
        read_rows = chunk_rows * max(1, rows_per_block // chunk_rows)
    else:
        read_rows = rows_per_block
    for start in range(0, store.n_samples, read_rows):
        stop = min(store.n_samples, start + read_rows)
        state = store.state_dicts(slice(start, stop))
        for a in range(0, stop - start, rows_per_block):
            b = min(stop - start, a + rows_per_block)
            yield slice(start + a, start + b), {k: v[a:b] for k, v in state.items()}
