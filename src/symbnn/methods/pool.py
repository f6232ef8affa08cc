"""Modes: the converged networks of the pool trained for the methods, in seed order."""

from __future__ import annotations

import os

import numpy as np

from symbnn.methods.base import Mode
from symbnn.store import StoreError, open_store


def converged_rows(pool_path: str | os.PathLike) -> np.ndarray:
    store = open_store(pool_path)
    if "converged" in store.info_names:
        return np.flatnonzero(store.info("converged"))
    return np.arange(store.n_samples)


def select_mode(pool_path: str | os.PathLike, index: int) -> Mode:
    """Mode `index`: the pool's index-th converged network."""
    rows = converged_rows(pool_path)
    if index >= len(rows):
        raise StoreError(
            f"{pool_path}: mode {index} asked for, but only {len(rows)} pool networks converged; "
            "raise methods.pool (or lower methods.modes / n_samples for Deep Ensembles)"
        )
    store = open_store(pool_path)
    row = int(rows[index])
    return Mode(seed=int(store.info("seed", row)), state=store.state_dict(row))
