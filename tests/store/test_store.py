import math

import numpy as np
import pytest
import torch
from conftest import stacked_state

from symbnn.store import (
    MIN_CHUNK_ROWS,
    StoreError,
    StoreWriter,
    chunk_shape,
    open_store,
    write_store,
)


def test_round_trip_is_bit_exact(optunet_store):
    store, state = optunet_store()
    assert store.n_samples == 6
    assert store.state_names == list(state)
    for name, values in state.items():
        read = store.read(name)
        assert read.dtype == values.numpy().dtype
        assert np.array_equal(read.view(np.uint8), values.numpy().view(np.uint8))
    sd = store.state_dict(3)
    model_state = {k: v[3] for k, v in state.items()}
    assert all(torch.equal(sd[k], model_state[k]) for k in sd)
    assert np.array_equal(store.info("seed"), np.arange(6))


def test_resnet_buffers_round_trip(tmp_path):
    state = stacked_state({"name": "resnet18", "num_classes": 10}, 2)
    store = write_store(tmp_path / "r.zarr", state, {"seed": np.arange(2)})
    assert store.shape("bn1.num_batches_tracked") == ()
    assert store.read("bn1.num_batches_tracked").dtype == np.int64
    for name in ("layer4.1.conv2.weight", "bn1.running_var", "fc.bias"):
        assert np.array_equal(store.read(name), state[name].numpy())


def test_chunks_are_a_few_mib_and_split_large_samples():
    assert chunk_shape(1000, (10, 3), 4) == (1000, 10, 3)
    big = chunk_shape(1000, (512, 512, 3, 3), 4)
    assert big[0] == MIN_CHUNK_ROWS and big[2:] == (512, 3, 3)
    assert math.prod(big) * 4 <= 4 * 2**20
    assert chunk_shape(1, (7,), 4) == (1, 7)


def test_param_blocks_cover_the_layer(tmp_path):
    rng = np.random.default_rng(0)
    values = rng.normal(size=(70, 300, 40)).astype(np.float32)  # 48 kB per sample
    store = write_store(tmp_path / "s.zarr", {"w": values}, {"seed": np.arange(70)})
    blocks = list(store.iter_param_blocks("w", max_bytes=70 * 40 * 4 * 16))
    assert len(blocks) > 1
    joined = np.concatenate([b for _, _, b in blocks], axis=1)
    assert np.array_equal(joined, values.reshape(70, -1))
    assert blocks[0][0] == 0 and blocks[-1][1] == 300 * 40
    rows = [1, 5, 9]
    sub = np.concatenate([b for _, _, b in store.iter_param_blocks("w", 10_000, rows=rows)], axis=1)
    assert np.array_equal(sub, values[rows].reshape(3, -1))


def test_streaming_writer_appends_batches(tmp_path):
    values = np.arange(5 * 4, dtype=np.float32).reshape(5, 4)
    with StoreWriter(tmp_path / "a.zarr", {"experiment": "x"}, expected_samples=5) as writer:
        for start in range(0, 5, 2):
            writer.append(
                {"w": values[start : start + 2]}, {"seed": np.arange(start, min(5, start + 2))}
            )
    store = open_store(tmp_path / "a.zarr")
    assert np.array_equal(store.read("w"), values)
    assert store.attrs["experiment"] == "x"


def test_interrupted_write_leaves_nothing(tmp_path):
    target = tmp_path / "half.zarr"
    with pytest.raises(RuntimeError), StoreWriter(target, {}) as writer:
        writer.append({"w": np.zeros((2, 3), np.float32)}, {"seed": np.arange(2)})
        raise RuntimeError("killed mid-way")
    assert not target.exists()
    assert not list(tmp_path.iterdir()), "temporary folder left behind"
    with pytest.raises(StoreError, match="not a symbnn store"):
        open_store(target)


def test_stale_temporary_folder_is_cleaned_and_rerun_succeeds(tmp_path):
    target = tmp_path / "s.zarr"
    stale = tmp_path / ".s.zarr.tmp-99999-deadbeef"
    stale.mkdir()
    (stale / "zarr.json").write_text("{}")
    write_store(target, {"w": np.ones((2, 2), np.float32)}, {"seed": np.arange(2)})
    assert not stale.exists()
    assert open_store(target).n_samples == 2


def test_snakemake_timestamp_is_not_read_as_data(optunet_store):
    store, _ = optunet_store()
    (store.path / ".snakemake_timestamp").write_text("")
    reopened = open_store(store.path)
    reopened.validate()
    assert ".snakemake_timestamp" not in reopened.state_names


def test_refuses_to_overwrite(optunet_store):
    store, state = optunet_store()
    with pytest.raises(StoreError, match="refusing to overwrite"):
        write_store(store.path, {"w": np.ones((2, 2), np.float32)})
    write_store(store.path, {"w": np.ones((2, 2), np.float32)}, overwrite=True)
    assert open_store(store.path).state_names == ["w"]


def test_validate_detects_nan_and_truncated_chunks(optunet_store, tmp_path):
    store, state = optunet_store()
    store.validate()
    bad = {k: v.clone() for k, v in state.items()}
    bad["fc1.weight"][2, 0, 0] = float("nan")
    nan_store = write_store(tmp_path / "nan.zarr", bad)
    with pytest.raises(StoreError, match="fc1.weight.*NaN"):
        nan_store.validate()
    chunk = next(
        p
        for p in (store.path / "state" / "conv2.weight").rglob("*")
        if p.is_file() and p.name != "zarr.json"
    )
    chunk.write_bytes(chunk.read_bytes()[:100])
    with pytest.raises(StoreError, match="conv2.weight"):
        open_store(store.path).validate()


def test_mismatched_batches_are_rejected(tmp_path):
    with pytest.raises(StoreError, match="disagree on the number of samples"):
        with StoreWriter(tmp_path / "x.zarr", {}) as writer:
            writer.append({"w": np.zeros((2, 3))}, {"seed": np.arange(3)})
    with pytest.raises(StoreError, match="differ from the first batch"):
        with StoreWriter(tmp_path / "y.zarr", {}) as writer:
            writer.append({"w": np.zeros((2, 3))})
            writer.append({"v": np.zeros((2, 3))})
    assert not (tmp_path / "x.zarr").exists() and not (tmp_path / "y.zarr").exists()
