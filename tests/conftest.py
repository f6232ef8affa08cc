import copy
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

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


REPO = Path(__file__).resolve().parents[1]


def repo_config():
    return yaml.safe_load((REPO / "config.yaml").read_text())


def tiny_experiment(n_samples, shard_size=2):
    """The default experiment cut down to seconds: few images, one epoch, every network kept."""
    tiny = copy.deepcopy(repo_config()["experiments"]["default"])
    tiny["data"].update(train_limit=256, test_limit=200, ood_options={"n": 50, "size": 28, "channels": 1})
    tiny["recipe"].update(epochs=1, milestones=[])
    tiny["posterior"].update(n_samples=n_samples, shard_size=shard_size, min_accuracy=0.0)
    tiny.pop("mmd", None)
    return tiny
