"""Appending samples to a Zarr array of large networks without rewriting its chunks.

A store's array of large samples (a ResNet-18's convolutions) is chunked as a band of
``band`` samples (MIN_CHUNK_ROWS) split along the first parameter axis; every other axis is
whole in a chunk. Zarr's append of a batch that ends inside a band writes that band's chunks
partially, and the next batch must read, extend, re-checksum and rewrite them: a store built
in batches of ~11 ResNet-18s rewrote each chunk about 5 times.

`BandedArray` writes the chunk files itself, in Zarr's format: a chunk's bytes are its
samples one after another (C order, samples outermost), so the rows of a band are appended
to its chunk files as they come, each column's slice padded to the chunk's width at the
array's edge, and the CRC-32C of each file is carried along; when the band is full (or, at
`finish`, padded with zero rows as Zarr pads an edge chunk) the checksum is appended and the
file is complete. Nothing is read back and nothing is held in memory beyond the rows being
appended. The array's shape is set once, by `finish`: until then Zarr sees an empty array,
and the store is not installed before `finish` has run.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BytesCodec, Crc32cCodec

from symbnn.store import chunk_checksums


def checksummed(array: zarr.Array) -> bool | None:
    """Whether the array's chunks end in a crc32c checksum; None when its codecs are not
    the plain little-endian bytes (and, optionally, crc32c) that `BandedArray` writes."""
    codecs = array.metadata.codecs
    plain = isinstance(codecs[0], BytesCodec) and str(codecs[0].endian.value) == "little"
    rest = codecs[1:]
    if not plain or len(rest) > 1 or (rest and not isinstance(rest[0], Crc32cCodec)):
        return None
    return bool(rest)


class BandedArray:
    def __init__(self, array: zarr.Array, folder: Path) -> None:
        """``array``: an empty Zarr array (0, d1, ...) stored as plain bytes, with or without
        crc32c (`checksummed`); ``folder``: where its chunk files go (the array's folder)."""
        chunks, shape = array.chunks, array.shape
        if shape[0] != 0 or len(shape) < 2 or tuple(chunks[2:]) != tuple(shape[2:]):
            raise ValueError(
                f"BandedArray needs an empty array of samples whose chunks split only the "
                f"first parameter axis, got shape {shape}, chunks {chunks}"
            )
        self.checksums = checksummed(array)
        if self.checksums is None:
            raise ValueError(f"BandedArray writes plain bytes, not {array.metadata.codecs}")
        self.array = array
        self.folder = Path(folder)
        self.band, self.column = chunks[0], chunks[1]
        self.sample_shape = tuple(shape[1:])
        self.dtype = array.dtype.newbyteorder("<")  # the bytes codec writes little-endian
        self.columns = math.ceil(self.sample_shape[0] / self.column)
        self.rows = 0  # rows appended
        self._checksums = [0] * self.columns  # running CRC-32C of the current band's files

    def append(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=self.dtype)
        if values.shape[1:] != self.sample_shape:
            raise ValueError(f"rows of shape {values.shape[1:]}, expected {self.sample_shape}")
        start = 0
        while start < len(values):
            room = self.band - self.rows % self.band
            part = values[start : start + room]
            self._append_to_band(part)
            start += len(part)

    def finish(self) -> None:
        """Complete the last band with zero rows and give the array its length."""
        rows = self.rows
        missing = -rows % self.band
        if missing:
            self._append_to_band(np.zeros((missing, *self.sample_shape), self.dtype))
        self.rows = rows
        self.array.resize((rows, *self.sample_shape))

    def _append_to_band(self, rows: np.ndarray) -> None:
        """Rows that fit in the current band, appended to each of its chunk files; the
        checksums close the files when the band is full."""
        band = self.rows // self.band
        full = (self.rows + len(rows)) % self.band == 0
        if self.rows % self.band == 0:  # a new band: its chunk files' folders
            for column in range(self.columns):
                self._chunk_path(band, column).parent.mkdir(parents=True, exist_ok=True)
        for column in range(self.columns):
            first = column * self.column
            piece = rows[:, first : first + self.column]
            if piece.shape[1] < self.column:  # the edge column: padded to the chunk's width
                padded = np.zeros((len(rows), self.column, *self.sample_shape[1:]), self.dtype)
                padded[:, : piece.shape[1]] = piece
                piece = padded
            data = np.ascontiguousarray(piece)
            crc = chunk_checksums.checksum(data, self._checksums[column]) if self.checksums else 0
            with open(self._chunk_path(band, column), "ab") as file:
                file.write(memoryview(data).cast("B"))
                if full and self.checksums:
                    file.write(crc.to_bytes(4, "little"))
            self._checksums[column] = 0 if full else crc
        self.rows += len(rows)

    def _chunk_path(self, band: int, column: int) -> Path:
        index = (band, column, *([0] * (len(self.sample_shape) - 1)))
        return self.folder / self.array.metadata.chunk_key_encoding.encode_chunk_key(index)
