import numpy as np
import pytest
import torch

from symbnn.models import build_model
from symbnn.store import write_store


def stacked_state(spec, n, seed=0):
    """n freshly initialised networks of ``spec`` as name -> tensor (n, *shape)."""
    torch.manual_seed(seed)
    dicts = [build_model(spec).state_dict() for _ in range(n)]
    return {name: torch.stack([d[name] for d in dicts]) for name in dicts[0]}


@pytest.fixture
def optunet_store(tmp_path):
    def make(name="store.zarr", n=6, first_seed=0, attrs=None):
        state = stacked_state({"name": "optunet"}, n, seed=first_seed)
        info = {
            "seed": np.arange(first_seed, first_seed + n),
            "converged": np.ones(n, bool),
            "test_accuracy": np.linspace(0.5, 0.9, n).astype(np.float32),
            "train_loss": np.linspace(1.0, 0.2, n).astype(np.float32),
        }
        base = {"experiment": "t", "architecture": {"name": "optunet"}, "recipe": {"epochs": 1},
                "data": {"train": "digits"}, "min_accuracy": 0.5}
        return write_store(tmp_path / name, state, info, {**base, **(attrs or {})}), state
    return make


@pytest.fixture
def one_torch_thread():
    """Small tensors: one torch thread is as fast and immune to a busy CI machine's other
    processes (the setting is restored afterwards)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
