"""Small OptuNet stores written for the tests that damage or compare them."""

import numpy as np
from conftest import stacked_state

from symbnn.store import write_store

ARCH = {"name": "optunet"}


def optunet(tmp_path, name="store.zarr", n=8, seed=0, scale=None, dtype=None):
    state = {k: v.numpy() for k, v in stacked_state(ARCH, n, seed=seed).items()}
    if scale is not None:
        state = {k: (v * np.float32(scale)).astype(v.dtype) for k, v in state.items()}
    if dtype is not None:
        state = {k: v.astype(dtype) for k, v in state.items()}
    info = {
        "seed": np.arange(seed, seed + n),
        "converged": np.ones(n, bool),
        "test_accuracy": np.linspace(0.5, 0.9, n).astype(np.float32),
    }
    attrs = {"architecture": ARCH, "experiment": "t"}
    return write_store(tmp_path / name, state, info, attrs)
