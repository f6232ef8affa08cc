"""CRC-32C chunk checksums for Zarr, verified beside the read instead of in its way.

The on-disk format is Zarr v3's standard ``crc32c`` codec (four little-endian checksum bytes
after each chunk); this module only replaces how Zarr computes and checks them:

- with the ``crc32c`` package, which releases the GIL (Zarr's own implementation holds it for
  NumPy buffers), so a checksum can run on another core;
- inside `checks_in_background()`, a chunk's checksum is computed on a worker thread while
  Zarr goes on copying the chunk into the output, and the block leaves the context only once
  every checksum it touched has been verified. A page-cache read spends about as long
  copying as checking, so overlapping the two hides most of the checksum's cost.

Outside that context (validation, any caller of plain Zarr) each chunk is verified before it
is decoded, as Zarr does. A mismatch is a ValueError either way; `symbnn.store` turns it into
an error naming the damaged chunk.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import crc32c
import numpy as np
import zarr
from zarr.codecs import Crc32cCodec

# Checks pending in the current `checks_in_background()` block. A context variable, because
# Zarr decodes on its own event-loop thread, in a copy of the reading thread's context.
_pending: contextvars.ContextVar[list[Future] | None] = contextvars.ContextVar(
    "symbnn_pending_checksums", default=None
)
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def checksum(data, previous: int = 0) -> int:
    """CRC-32C (Castagnoli) of a bytes-like object, as the ``crc32c`` codec stores it; with
    ``previous``, the CRC of the bytes that CRC covered followed by ``data``."""
    return crc32c.crc32c(data, previous)


def chunk_is_intact(encoded) -> bool:
    """Whether an encoded chunk (payload then four checksum bytes) matches its checksum."""
    view = memoryview(encoded).cast("B")
    return len(view) >= 4 and checksum(view[:-4]) == int.from_bytes(view[-4:], "little")


def _verify(encoded: np.ndarray) -> None:
    if not chunk_is_intact(encoded):
        raise ValueError("stored and computed crc32c checksums of a chunk do not match")


def _worker() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            # One thread: enough to overlap checking with copying, and a job that was given
            # one core borrows at most one more, briefly.
            _executor = ThreadPoolExecutor(1, thread_name_prefix="symbnn-crc32c")
        return _executor


@contextlib.contextmanager
def checks_in_background() -> Iterator[None]:
    """Zarr reads inside the block verify their chunks' checksums on a worker thread; leaving
    the block waits for them and raises ValueError if one does not match."""
    pending: list[Future] = []
    token = _pending.set(pending)
    try:
        yield
    finally:
        _pending.reset(token)
    for future in pending:
        future.result()


class BackgroundCrc32c(Crc32cCodec):
    """Zarr's ``crc32c`` codec (same format, same name), computed with the GIL released and,
    inside `checks_in_background()`, verified off the decoding thread."""

    def _decode_sync(self, chunk_bytes, chunk_spec):
        encoded = chunk_bytes.as_numpy_array()
        pending = _pending.get()
        if pending is None:
            _verify(encoded)
        else:
            pending.append(_worker().submit(_verify, encoded))
        return chunk_spec.prototype.buffer.from_array_like(encoded[:-4])

    async def _decode_single(self, chunk_bytes, chunk_spec):
        return self._decode_sync(chunk_bytes, chunk_spec)

    # A batch in one loop: Zarr's default schedules a task per chunk (behind a semaphore),
    # which for work that never waits only adds overhead (about 5% of a page-cache read).
    async def decode(self, chunks_and_specs):
        return [
            None if chunk is None else self._decode_sync(chunk, spec)
            for chunk, spec in chunks_and_specs
        ]

    async def encode(self, chunks_and_specs):
        return [
            None if chunk is None else self._encode_sync(chunk, spec)
            for chunk, spec in chunks_and_specs
        ]

    def _encode_sync(self, chunk_bytes, chunk_spec):
        data = chunk_bytes.as_numpy_array()
        digest = np.array([checksum(data)], dtype="<u4").view(np.uint8)
        return chunk_spec.prototype.buffer.from_array_like(np.concatenate([data, digest]))

    async def _encode_single(self, chunk_bytes, chunk_spec):
        return self._encode_sync(chunk_bytes, chunk_spec)


def install() -> None:
    """Make Zarr use `BackgroundCrc32c` for every array whose metadata names ``crc32c``."""
    zarr.registry.register_codec("crc32c", BackgroundCrc32c)
    zarr.config.set({"codecs.crc32c": f"{__name__}.BackgroundCrc32c"})
