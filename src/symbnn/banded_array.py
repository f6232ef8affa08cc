"""Appending samples to a Zarr array of large networks without rewriting its chunks.

A store's array of large samples (a ResNet-18's convolutions) is chunked as a band of
``band`` samples (MIN_CHUNK_ROWS) split along the first parameter axis. Zarr's append of a
batch that ends inside a band writes that band's chunks partially, and the next batch must
read, extend, re-checksum and rewrite them: a store built in batches of ~11 ResNet-18s rewrote
each chunk about 5 times (an import of 48 networks took twice as long per network as one of
16). `BandedArray` writes only whole bands, each chunk once and without reading it back; the
rows of the unfinished band wait in a spill file (not in memory), and `finish` writes them as
the last, partial band. Memory stays at one chunk column of one band at a time.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import zarr


class BandedArray:
    def __init__(self, array: zarr.Array, spill: Path) -> None:
        if array.shape[0] != 0 or len(array.shape) < 2:
            raise ValueError("BandedArray starts from an empty array of samples (0, d1, ...)")
        self.array = array
        self.band = array.chunks[0]
        self.column = array.chunks[1]  # chunk width along the first parameter axis
        self.sample_shape = tuple(array.shape[1:])
        # bytes of one sample's first-axis slice (contiguous in a C-order sample)
        self.slice_bytes = math.prod(self.sample_shape[1:]) * array.dtype.itemsize
        self.sample_bytes = self.slice_bytes * self.sample_shape[0]
        self.spill = spill
        self.written = 0  # rows in the Zarr array: whole bands until `finish`
        self.held = 0  # rows waiting in the spill file (fewer than a band)

    def append(self, values: np.ndarray) -> None:
        values = np.ascontiguousarray(values, dtype=self.array.dtype)
        if values.shape[1:] != self.sample_shape:
            raise ValueError(f"rows of shape {values.shape[1:]}, expected {self.sample_shape}")
        start = 0
        while self.held + len(values) - start >= self.band:
            take = self.band - self.held
            self._write_rows(values[start : start + take])
            start += take
        if start < len(values):
            with open(self.spill, "ab") as file:
                values[start:].tofile(file)
            self.held += len(values) - start

    def finish(self) -> None:
        """Write the rows still held (the last band, partial) and remove the spill file."""
        if self.held:
            self._write_rows(np.empty((0, *self.sample_shape), self.array.dtype))
        self.spill.unlink(missing_ok=True)

    def _write_rows(self, values: np.ndarray) -> None:
        """The held rows followed by ``values`` as rows written..written + n, chunk column
        by chunk column; the spill file is emptied."""
        rows = self.held + len(values)
        stop = self.written + rows
        self.array.resize((stop, *self.sample_shape))
        fd = os.open(self.spill, os.O_RDONLY) if self.held else None
        try:
            for first in range(0, self.sample_shape[0], self.column):
                last = min(first + self.column, self.sample_shape[0])
                block = np.empty((rows, last - first, *self.sample_shape[1:]), self.array.dtype)
                for row in range(self.held):
                    offset = row * self.sample_bytes + first * self.slice_bytes
                    target = memoryview(block[row]).cast("B")
                    if os.preadv(fd, [target], offset) != target.nbytes:
                        raise OSError(f"{self.spill}: spill file shorter than expected")
                block[self.held :] = values[:, first:last]
                self.array[self.written : stop, first:last] = block
        finally:
            if fd is not None:
                os.close(fd)
        self.written, self.held = stop, 0
        self.spill.unlink(missing_ok=True)
