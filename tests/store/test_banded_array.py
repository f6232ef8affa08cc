"""Stores of large samples written in batches: every band written once, never read back,
and the store equal to the rows appended, whatever the batch sizes."""

import numpy as np
import pytest
import zarr.storage

import symbnn.store.writer
from symbnn.store import StoreWriter, open_store

SHAPES = {"conv": (300, 64, 3, 3), "vector": (40_000,), "bias": (17,)}


def rows(n, seed=0):
    rng = np.random.default_rng(seed)
    return {
        name: rng.standard_normal((n, *shape)).astype(np.float16) for name, shape in SHAPES.items()
    }


def write(path, data, batches, expected, open_it=True):
    start = 0
    with StoreWriter(path, {"experiment": "t"}, expected_samples=expected) as writer:
        for size in batches:
            writer.append(
                {k: v[start : start + size] for k, v in data.items()},
                {"seed": np.arange(start, start + size)},
            )
            start += size
    return open_store(path) if open_it else None


@pytest.mark.parametrize(
    "batches",
    [[7, 13, 64, 1, 65], [150], [64, 64, 22], [1] * 70, [100, 50]],
    ids=["ragged", "one", "aligned", "single-rows", "two"],
)
def test_rows_come_back_as_appended(tmp_path, monkeypatch, batches):
    monkeypatch.setattr(symbnn.store.writer, "WRITE_BUFFER_BYTES", 1)  # a flush per append
    n = sum(batches)
    data = rows(n)
    store = write(tmp_path / "s.zarr", data, batches, expected=n)
    assert store.validate() == []
    assert store.n_samples == n
    for name, values in data.items():
        assert np.array_equal(store.read(name, slice(None)), values), name
    assert store.info("seed").tolist() == list(range(n))
    # the large arrays are split along their first axis in bands of 64 samples
    assert store._group["state/conv"].chunks[:2] == (64, 56)


def test_bands_are_never_read_back_while_writing(tmp_path, monkeypatch):
    monkeypatch.setattr(symbnn.store.writer, "WRITE_BUFFER_BYTES", 1)
    chunk_reads = []
    get = zarr.storage.LocalStore.get

    async def spy(self, key, *args, **kwargs):
        if "state/conv/c/" in key:
            chunk_reads.append(key)
        return await get(self, key, *args, **kwargs)

    monkeypatch.setattr(zarr.storage.LocalStore, "get", spy)
    data = rows(150)
    write(tmp_path / "s.zarr", data, [7, 13, 64, 1, 65], expected=150)
    assert chunk_reads == []


def test_a_failed_build_leaves_no_store_and_no_spill(tmp_path, monkeypatch):
    monkeypatch.setattr(symbnn.store.writer, "WRITE_BUFFER_BYTES", 1)
    data = rows(30)
    with pytest.raises(RuntimeError, match="stop"):
        with StoreWriter(tmp_path / "s.zarr", {"experiment": "t"}, expected_samples=100) as w:
            w.append({k: v[:30] for k, v in data.items()}, {"seed": np.arange(30)})
            raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def test_chunk_files_are_those_zarr_writes(tmp_path, monkeypatch):
    """Byte for byte: the chunk files written band by band (edge column and the zero-padded
    last band included) are those Zarr writes for the same array in one go."""
    monkeypatch.setattr(symbnn.store.writer, "WRITE_BUFFER_BYTES", 1)
    data = rows(150)
    write(tmp_path / "s.zarr", data, [7, 13, 64, 1, 65], expected=150)
    ours = tmp_path / "s.zarr" / "state" / "conv"
    array = zarr.open_array(ours, mode="r")
    reference = zarr.create_array(
        tmp_path / "ref.zarr",
        shape=array.shape,
        chunks=array.chunks,
        dtype=array.dtype,
        compressors=symbnn.store.CHECKSUM_CODECS,
        fill_value=0,
        config=symbnn.store.ARRAY_CONFIG,
    )
    reference[...] = data["conv"]
    files = sorted(p.relative_to(ours) for p in (ours / "c").rglob("*") if p.is_file())
    assert files == sorted(
        p.relative_to(tmp_path / "ref.zarr")
        for p in (tmp_path / "ref.zarr" / "c").rglob("*")
        if p.is_file()
    )
    assert len(files) == 3 * 6  # 3 bands of 64 rows x 6 columns of 56 (the last one 20 wide)
    for name in files:
        assert (ours / name).read_bytes() == (tmp_path / "ref.zarr" / name).read_bytes(), name


@pytest.mark.parametrize(
    "compressors, banded",
    [((), True), (None, True), ("zstd", False)],
    ids=["bytes only", "none given", "compressed"],
)
def test_only_plain_bytes_are_written_band_by_band(tmp_path, monkeypatch, compressors, banded):
    """Stores written without checksums (as before them) are banded too, without trailers;
    a compressed layout falls back to Zarr's appends. Either way the rows come back."""
    if compressors == "zstd":
        from zarr.codecs import ZstdCodec

        compressors = (ZstdCodec(),)
    monkeypatch.setattr(symbnn.store.writer, "WRITE_BUFFER_BYTES", 1)
    monkeypatch.setattr(symbnn.store.writer, "CHECKSUM_CODECS", compressors)
    # a manifest records checksums, which these layouts do not have
    monkeypatch.setattr(symbnn.store.writer, "seal", lambda *args: None)
    data = rows(70)
    # (the store's attributes promise checksums: read the array with Zarr alone)
    write(tmp_path / "s.zarr", data, [30, 40], expected=70, open_it=False)
    array = zarr.open_array(tmp_path / "s.zarr" / "state" / "conv", mode="r")
    assert np.array_equal(array[...], data["conv"])
    chunk = tmp_path / "s.zarr" / "state" / "conv" / "c" / "0" / "0" / "0" / "0" / "0"
    if banded:
        assert chunk.stat().st_size == 64 * 56 * 64 * 9 * 2  # no checksum trailer
