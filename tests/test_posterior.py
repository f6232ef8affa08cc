import numpy as np
import pytest

from symbnn.posterior import gather_shards
from symbnn.store import StoreError, open_store


def test_gather_concatenates_shards_in_order(optunet_store, tmp_path):
    a, state_a = optunet_store("a.zarr", n=3, first_seed=0)
    b, state_b = optunet_store("b.zarr", n=2, first_seed=3)
    out = gather_shards([a.path, b.path], tmp_path / "target.zarr")
    assert out.n_samples == 5
    assert np.array_equal(out.info("seed"), np.arange(5))
    for name in state_a:
        assert np.array_equal(out.read(name), np.concatenate([state_a[name], state_b[name]]))
    assert out.attrs["experiment"] == "t" and out.attrs["shards"] == ["a.zarr", "b.zarr"]
    out.validate()


def test_gather_rejects_repeated_seeds(optunet_store, tmp_path):
    a, _ = optunet_store("a.zarr", n=3, first_seed=0)
    b, _ = optunet_store("b.zarr", n=3, first_seed=2)
    with pytest.raises(StoreError, match="repeat seeds"):
        gather_shards([a.path, b.path], tmp_path / "target.zarr")
    assert not (tmp_path / "target.zarr").exists()


def test_gather_rejects_shards_of_another_recipe(optunet_store, tmp_path):
    a, _ = optunet_store("a.zarr", n=2, first_seed=0)
    b, _ = optunet_store("b.zarr", n=2, first_seed=2, attrs={"recipe": {"epochs": 2}})
    with pytest.raises(StoreError, match="b.zarr: attribute 'recipe' differs"):
        gather_shards([a.path, b.path], tmp_path / "target.zarr")
