"""Modes: the converged networks of the pool trained for the methods, in seed order."""

from __future__ import annotations

import os

from symbnn.methods.base import Mode
from symbnn.store import StoreError, open_store


def select_mode(pool_path: str | os.PathLike, converged: list[int], index: int) -> Mode:
    """Mode `index`: the pool's index-th converged network (`converged`: the converged rows,
    from `symbnn.posterior.converged_rows`)."""
    if index >= len(converged):
        raise StoreError(
            f"{pool_path}: mode {index} asked for, but only {len(converged)} pool networks "
            "converged; raise methods.pool (or lower methods.modes / n_samples for Deep Ensembles)"
        )
    store = open_store(pool_path)
    row = int(converged[index])
    return Mode(seed=int(store.info("seed", row)), state=store.state_dict(row))
