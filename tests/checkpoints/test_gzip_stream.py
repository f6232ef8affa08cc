"""The bundles' gzip reader: the same bytes as the gzip module, every member, and a clear
error for a truncated or damaged file."""

import gzip
import zlib

import numpy as np
import pytest

from symbnn.checkpoints.gzip_stream import open_gzip


@pytest.fixture
def payload():
    rng = np.random.default_rng(0)
    # compressible and incompressible parts, several MiB (more than one read and inflate step)
    return rng.integers(0, 4, 3 * 2**20, dtype=np.uint8).tobytes() + rng.bytes(2 * 2**20)


def test_reads_what_gzip_reads(tmp_path, payload):
    path = tmp_path / "a.gz"
    path.write_bytes(gzip.compress(payload, compresslevel=1))
    with open_gzip(path) as stream:
        assert stream.read() == payload
    with open_gzip(path) as stream:  # small reads cross the inflate steps
        parts = iter(lambda: stream.read(12_345), b"")
        assert b"".join(parts) == payload


def test_members_are_read_one_after_another(tmp_path, payload):
    path = tmp_path / "two.gz"
    path.write_bytes(gzip.compress(payload[:1000]) + gzip.compress(payload))
    with open_gzip(path) as stream:
        assert stream.read() == payload[:1000] + payload


def test_a_truncated_file_is_an_eof_error(tmp_path, payload):
    path = tmp_path / "cut.gz"
    path.write_bytes(gzip.compress(payload)[:-100_000])
    with pytest.raises(EOFError, match="ends before its end-of-stream marker"):
        with open_gzip(path) as stream:
            stream.read()


def test_a_damaged_file_fails_its_checks(tmp_path, payload):
    data = bytearray(gzip.compress(payload))
    data[-6] ^= 0xFF  # inside the trailer's CRC-32
    path = tmp_path / "bad.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(zlib.error):
        with open_gzip(path) as stream:
            stream.read()
