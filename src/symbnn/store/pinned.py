"""Every chunk a reader reads held to the manifest: a chunk file is accepted only if it is
the one the store was written with, not merely an intact one.

A chunk's crc32c codec proves its bytes match the checksum they end with; it cannot tell a
chunk copied in from another store of the same layout (intact, with its own valid checksum)
or a chunk rewritten with a recomputed checksum. The manifest records each chunk's checksum
as written. `PinnedStore` is Zarr's local store that compares the checksum a chunk file ends
with (its last four bytes, already in memory) with the manifest's entry for that chunk as the
file is read; the codec then checks the bytes against that same checksum while decoding. So
the checksum computed while decoding is the manifest's, at no second pass over the bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import zarr
from zarr.storage import LocalStore

from symbnn.store.layout import ArrayLayout


class ChunkNotRecorded(Exception):
    """A chunk file is not the one the manifest records (`PinnedStore`)."""

    def __init__(self, label: str, index: tuple[int, ...], found: int, expected: int) -> None:
        self.label, self.index, self.found, self.expected = label, index, found, expected
        super().__init__(f"{label}: chunk {index} {self.problem}")

    @property
    def problem(self) -> str:
        return (
            f"is intact but not the chunk this store was written with (its crc32c is "
            f"{self.found:#010x}, the manifest records {self.expected:#010x}): it was replaced "
            "or rewritten"
        )


class _Pins:
    """One array's chunk grid and the manifest's checksum of each chunk, in C order."""

    def __init__(self, layout: ArrayLayout, crcs: Sequence[int]) -> None:
        self.label, self.grid, self.crcs = layout.label, layout.grid, crcs
        self.separator = layout.separator

    def position(self, rest: list[str]) -> tuple[tuple[int, ...], int] | None:
        """(index, position in C order) of the chunk whose key follows the array's folder
        as ``rest`` ("c/0/1" split at "/", or ["c.0.1"]); None for any other file."""
        if self.separator == "/":
            parts = rest[1:] if rest[:1] == ["c"] else None
        else:
            parts = rest[0].split(".")[1:] if len(rest) == 1 and rest[0][:2] == "c." else None
        if parts is None or len(parts) != len(self.grid):
            return None
        try:
            index = tuple(int(part) for part in parts)
        except ValueError:
            return None
        position = 0
        for i, n in zip(index, self.grid, strict=True):
            if not 0 <= i < n:
                return None
            position = position * n + i
        return index, position


class PinnedStore(LocalStore):
    """A read-only local store whose chunk reads raise `ChunkNotRecorded` when a chunk file
    ends with another checksum than the manifest's (``pins``: label -> that array's
    checksums). Files that are not chunks of a pinned array are read as they are."""

    def __init__(
        self,
        root: Path | str,
        *,
        read_only: bool = True,
        pins: Mapping[str, _Pins] | None = None,
    ) -> None:
        super().__init__(root, read_only=True)
        self._pins = dict(pins or {})

    def with_read_only(self, read_only: bool = False) -> PinnedStore:
        return PinnedStore(self.root, pins=self._pins)

    async def get(self, key, prototype=None, byte_range=None):
        buffer = await super().get(key, prototype, byte_range)
        if buffer is not None and byte_range is None:
            self._check(key, buffer)
        return buffer

    def _check(self, key: str, buffer) -> None:
        parts = key.split("/")
        for cut in range(1, len(parts)):
            pins = self._pins.get("/".join(parts[:cut]))
            if pins is None:
                continue
            where = pins.position(parts[cut:])
            data = buffer.as_numpy_array()
            if where is None or len(data) < 4:  # not a chunk; a short one fails its codec
                return
            index, position = where
            found = int.from_bytes(data[-4:].tobytes(), "little")
            if found != pins.crcs[position]:
                raise ChunkNotRecorded(pins.label, index, found, pins.crcs[position])
            return


def open_group(
    path: Path,
    layouts: Mapping[str, ArrayLayout],
    recorded: Mapping[str, Sequence[int]] | None,
) -> zarr.Group:
    """The Zarr group at ``path`` for reading; given ``recorded`` (the manifest's checksums,
    label -> one per chunk of ``layouts[label]``), every chunk read is held to them."""
    if recorded is None:  # a store without a manifest (opened with allow_unverified)
        return zarr.open_group(path, mode="r", zarr_format=3)
    pins = {label: _Pins(layouts[label], recorded[label]) for label in recorded}
    return zarr.open_group(store=PinnedStore(path, pins=pins), mode="r", zarr_format=3)
