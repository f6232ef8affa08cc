"""What a store is on disk: its format name and version, its chunking, the codecs of its
arrays, and the error every problem with one raises (`symbnn.store`)."""

from __future__ import annotations

import math

from symbnn.store import chunk_checksums

FORMAT = "symbnn-store"
PREDICTIONS = "symbnn-predictions"  # the format of predictions stores (`symbnn.store.predictions`)
# 2: a manifest and its digest cover the metadata and every chunk's checksum
FORMAT_VERSION = 2
CHUNK_TARGET_BYTES = 4 * 2**20
# Rows kept together when a sample is too large for one chunk; also the floor that makes
# column-block reads over all samples cheap.
MIN_CHUNK_ROWS = 64
# Every array: one CRC-32C per chunk, and every chunk written (Zarr skips all-zero chunks by
# default, which makes a deleted chunk indistinguishable from a zero one).
CHECKSUM = "crc32c"
ARRAY_CONFIG = {"write_empty_chunks": True}
CHECKSUM_CODECS = (chunk_checksums.BackgroundCrc32c(),)
# Zarr reads every crc32c array through symbnn's implementation (same format, faster reads).
chunk_checksums.install()
# How a damaged store is repaired, appended to the messages that report one.
REMEDY = "restore it (`make verify` names intact copies) or rerun the step that wrote it"
# The attribute `symbnn store upgrade` records (from which format; values verified or not).
UPGRADED = "upgraded"


class StoreError(Exception):
    """A store is missing, malformed, inconsistent or corrupted; the message names the culprit."""


def chunk_shape(
    n_samples: int,
    sample_shape: tuple[int, ...],
    itemsize: int,
    target_bytes: int = CHUNK_TARGET_BYTES,
) -> tuple[int, ...]:
    """Chunk of a (n_samples, *sample_shape) array: whole samples when they fit in a few MiB,
    else a block of MIN_CHUNK_ROWS samples split along the first parameter axis."""
    n_samples = max(1, n_samples)
    per_sample = max(1, math.prod(sample_shape) * itemsize)
    rows = min(n_samples, max(1, target_bytes // per_sample))
    if rows >= min(MIN_CHUNK_ROWS, n_samples) or not sample_shape:
        return (rows, *sample_shape)
    rows = min(MIN_CHUNK_ROWS, n_samples)
    per_slice = per_sample // sample_shape[0]
    first = max(1, min(sample_shape[0], target_bytes // (rows * per_slice)))
    return (rows, first, *sample_shape[1:])
