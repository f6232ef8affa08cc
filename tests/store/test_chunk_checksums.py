"""symbnn's crc32c codec: Zarr's format byte for byte, and damage detected whether the
checksum is verified inline or on the worker thread."""

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec

from symbnn.store import chunk_checksums
from symbnn.store.chunk_checksums import BackgroundCrc32c, checks_in_background


def write(path, codec, values):
    array = zarr.create_array(
        path, shape=values.shape, chunks=(4, values.shape[1]), dtype=values.dtype,
        compressors=[codec], overwrite=True,
    )  # fmt: skip
    array[:] = values
    return sorted(p for p in path.rglob("*") if p.is_file() and p.parent.name != path.name)


def test_chunks_are_byte_identical_to_zarrs_own_codec(tmp_path):
    values = np.random.default_rng(0).standard_normal((16, 5)).astype(np.float32)
    ours = write(tmp_path / "ours.zarr", BackgroundCrc32c(), values)
    stock = write(tmp_path / "stock.zarr", Crc32cCodec(), values)
    assert [p.read_bytes() for p in ours] == [p.read_bytes() for p in stock]
    assert len(ours) == 4
    assert all(chunk_checksums.chunk_is_intact(p.read_bytes()) for p in ours)


@pytest.mark.parametrize("background", [False, True])
def test_a_flipped_bit_is_an_error_inline_and_in_the_background(tmp_path, background):
    values = np.arange(80, dtype=np.float32).reshape(16, 5)
    chunks = write(tmp_path / "a.zarr", BackgroundCrc32c(), values)
    array = zarr.open_array(tmp_path / "a.zarr")
    with checks_in_background():  # intact chunks pass, values unchanged
        read = array[:]
    np.testing.assert_array_equal(read, values)
    damaged = bytearray(chunks[2].read_bytes())
    damaged[7] ^= 0x10
    chunks[2].write_bytes(bytes(damaged))
    assert not chunk_checksums.chunk_is_intact(bytes(damaged))
    with pytest.raises(ValueError, match="crc32c"):
        if background:
            with checks_in_background():
                array[:]
        else:
            array[:]
    np.testing.assert_array_equal(array[:8], values[:8])  # the intact chunks still read
