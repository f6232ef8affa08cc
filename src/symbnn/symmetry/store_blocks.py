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

from symbnn.store import Store, StoreError

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
        check_finite_state(store, state, start)
        for a in range(0, stop - start, rows_per_block):
            b = min(stop - start, a + rows_per_block)
            yield slice(start + a, start + b), {k: v[a:b] for k, v in state.items()}


def check_finite_state(store: Store, state: dict[str, torch.Tensor], first_row: int) -> None:
    """StoreError naming the store, the array and the first sample (rows numbered from
    ``first_row``) where the stacked ``state`` read from ``store`` holds NaN or infinity: such
    weights would otherwise fail deep in a solver ("matrix contains invalid numeric entries")
    without a word about where they came from."""
    for name, values in state.items():
        if not values.is_floating_point():
            continue
        flat = values.reshape(values.shape[0], -1)
        if bool(torch.isfinite(flat.sum(dim=1)).all()):
            continue  # NaN and inf propagate through a sum; an overflow is checked below
        bad = (~torch.isfinite(flat).all(dim=1)).nonzero().flatten()
        if len(bad):
            raise StoreError(
                f"{store.path}: state/{name} holds NaN or infinite weights (sample "
                f"{first_row + int(bad[0])}{f' and {len(bad) - 1} more' if len(bad) > 1 else ''})"
                f"; `symbnn store validate {store.path}` checks the whole store"
            )


def finite_state_dict(store: Store, row: int) -> dict[str, torch.Tensor]:
    """Sample ``row`` of ``store`` as a state dict, refused (naming the store and the array)
    when it holds NaN or infinite weights."""
    state = store.state_dict(row)
    check_finite_state(store, {k: v.unsqueeze(0) for k, v in state.items()}, row)
    return state
