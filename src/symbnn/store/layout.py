"""Reading a store's metadata without its data: the group's attributes and each array's
layout (shape, chunks, chunk files), from which a chunk file is checked on its bytes."""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from symbnn.store import chunk_checksums
from symbnn.store.format import CHECKSUM, REMEDY, StoreError


@dataclass(frozen=True)
class ArrayLayout:
    """What checking an array's chunks needs, read from its ``zarr.json`` (no data read)."""

    store: Path  # the store (group) folder, for messages
    label: str  # the array's path inside the store, e.g. "state/fc1.weight"
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype
    itemsize: int
    separator: str
    checksum: bool  # the codecs end with crc32c
    plain: bool  # codecs are exactly bytes (+ crc32c): a chunk file's size is known
    meta: dict = field(default_factory=dict, compare=False, repr=False)  # its zarr.json

    @property
    def folder(self) -> Path:
        return self.store / self.label

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(-(-s // c) for s, c in zip(self.shape, self.chunks, strict=True))

    def indices(self) -> Iterator[tuple[int, ...]]:
        return itertools.product(*(range(n) for n in self.grid))

    def key(self, index: tuple[int, ...]) -> str:
        """The chunk's file, relative to the store folder."""
        parts = ("c", *map(str, index))
        if self.separator == "/":
            return f"{self.label}/{'/'.join(parts)}"
        return f"{self.label}/{'.'.join(parts)}"

    def slices(self, index: tuple[int, ...]) -> tuple[slice, ...]:
        return tuple(
            slice(i * c, min(s, (i + 1) * c))
            for i, c, s in zip(index, self.chunks, self.shape, strict=True)
        )

    def describe(self, index: tuple[int, ...]) -> str:
        return f"chunk {index} (file {self.key(index)})"

    def present(self) -> set[tuple[int, ...]]:
        """Indices of the chunk files on disk (a directory listing)."""
        found: set[tuple[int, ...]] = set()
        if self.separator == "/":
            root = self.folder / "c"
            for folder, _, files in os.walk(root):
                prefix = Path(folder).relative_to(root).parts
                for name in files:
                    index = _as_index((*prefix, name))
                    if index is not None:
                        found.add(index)
        elif self.folder.is_dir():
            for entry in os.scandir(self.folder):
                if entry.name.startswith("c."):
                    index = _as_index(entry.name.split(".")[1:])
                    if index is not None:
                        found.add(index)
        return {index for index in found if len(index) == len(self.shape)}

    def missing(self) -> list[tuple[int, ...]]:
        present = self.present()
        return [index for index in self.indices() if index not in present]

    def chunk_problem(self, index: tuple[int, ...]) -> str | None:
        """Why the chunk file is damaged (checked on its bytes, without Zarr), or None."""
        path = self.store / self.key(index)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return "is missing"
        except OSError as exc:
            return f"cannot be read ({exc.strerror or exc})"
        if self.plain:
            expected = math.prod(self.chunks) * self.itemsize + (4 if self.checksum else 0)
            if len(data) != expected:
                return f"has {len(data)} bytes instead of {expected} (truncated or overwritten)"
        if self.checksum:
            if len(data) < 4:
                return "is too short to hold a checksum"
            if not chunk_checksums.chunk_is_intact(data):
                return "fails its crc32c checksum (damaged on disk)"
        return None

    def stored_checksum(self, index: tuple[int, ...]) -> int | None:
        """The checksum the chunk file ends with (its last four bytes), None when it cannot
        be read."""
        try:
            with open(self.store / self.key(index), "rb") as file:
                file.seek(-4, os.SEEK_END)
                tail = file.read(4)
        except OSError:
            return None
        return int.from_bytes(tail, "little") if len(tail) == 4 else None

    def first_damaged(self) -> tuple[tuple[int, ...], str] | None:
        for index in self.indices():
            problem = self.chunk_problem(index)
            if problem is not None:
                return index, problem
        return None


def _integers(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value
    ):
        raise ValueError(f"{what} is {str(value)[:80]!r}, not a list of integers")
    return tuple(value)


def _object(meta: dict, key: str, default: Any = None) -> dict:
    value = meta.get(key, default)
    if not isinstance(value, dict):
        raise ValueError(f"{key!r} is {str(value)[:80]!r}, not a JSON object")
    return value


def _array_fields(
    meta: Any,
) -> tuple[tuple[int, ...], tuple[int, ...], np.dtype, str, list[Any]]:
    """(shape, chunk shape, data type, chunk key separator, codec names) of an array's
    ``zarr.json`` content; ValueError saying which key is missing or of the wrong type."""
    if not isinstance(meta, dict):
        raise ValueError(f"it is a JSON {json_type(meta)}, not an object")
    if meta.get("zarr_format") != 3 or meta.get("node_type") != "array":
        raise ValueError(
            f"zarr_format is {meta.get('zarr_format')!r} and node_type "
            f"{meta.get('node_type')!r}, not 3 and 'array'"
        )
    shape = _integers(meta.get("shape"), "shape")
    grid = _object(meta, "chunk_grid")
    if grid.get("name") != "regular":
        raise ValueError(f"chunk grid {str(grid.get('name'))[:80]!r} is not 'regular'")
    chunks = _integers(_object(grid, "configuration").get("chunk_shape"), "chunk_shape")
    if len(chunks) != len(shape) or min(chunks, default=1) < 1:
        raise ValueError(f"chunk shape {chunks} does not fit shape {shape}")
    encoding = _object(meta, "chunk_key_encoding", {})
    separator = _object(encoding, "configuration", {}).get("separator", "/")
    if encoding.get("name", "default") != "default" or separator not in ("/", "."):
        raise ValueError(
            f"chunk key encoding {str(encoding)[:80]!r} is not 'default' with separator '/' or '.'"
        )
    codecs = meta.get("codecs", [])
    if not isinstance(codecs, list) or not all(isinstance(c, dict) for c in codecs):
        raise ValueError(f"codecs are {str(codecs)[:80]!r}, not a list of JSON objects")
    _object(meta, "attributes", {})
    fill = meta.get("fill_value")
    if isinstance(fill, (dict, list)) or fill is None:
        raise ValueError(f"fill_value is {str(fill)[:80]!r}, not a number")
    data_type = meta.get("data_type")
    try:
        if not isinstance(data_type, str):
            raise TypeError
        dtype = np.dtype(data_type)
    except (TypeError, ValueError):
        raise ValueError(f"data_type {str(data_type)[:80]!r} is not a data type") from None
    return shape, chunks, dtype, separator, [c.get("name") for c in codecs]


def _as_index(parts: Sequence[str]) -> tuple[int, ...] | None:
    try:
        return tuple(int(part) for part in parts)
    except ValueError:
        return None


def read_layout(store: Path, label: str) -> ArrayLayout:
    """The layout of array ``label`` of the Zarr v3 group at ``store``; StoreError naming the
    array when its metadata is missing or not that of a regular-chunked array."""
    meta_path = store / label / "zarr.json"
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise StoreError(
            f"{store}: array {label} is missing (no {label}/zarr.json); the store is incomplete: "
            f"{REMEDY}"
        ) from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"{store}: cannot read the metadata of {label}: {exc}") from exc
    try:
        shape, chunks, dtype, separator, codecs = _array_fields(meta)
    except ValueError as exc:
        raise StoreError(f"{store}: malformed metadata of {label} ({meta_path}): {exc}") from None
    return ArrayLayout(
        store=store,
        label=label,
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        itemsize=dtype.itemsize,
        separator=separator,
        checksum=bool(codecs) and codecs[-1] == CHECKSUM,
        plain=codecs in (["bytes"], ["bytes", CHECKSUM]),
        meta=meta,
    )


def read_group_meta(path: Path, what: str = "symbnn store") -> dict[str, Any]:
    """The content of the group's ``zarr.json``: a JSON object with ``zarr_format`` 3,
    ``node_type`` "group" and an object of ``attributes``; StoreError naming the file and
    the key at fault when it is missing or is anything else."""
    file = path / "zarr.json"
    try:
        meta = json.loads(file.read_text())
    except FileNotFoundError:
        raise StoreError(f"{path}: not a {what} (no zarr.json; missing or half-written)") from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: cannot read zarr.json: {exc}") from exc
    if not isinstance(meta, dict):
        problem = f"is a JSON {json_type(meta)}, not an object"
    elif meta.get("zarr_format") != 3 or meta.get("node_type") != "group":
        problem = (
            f"has zarr_format {meta.get('zarr_format')!r} and node_type "
            f"{meta.get('node_type')!r}, not 3 and 'group'"
        )
    elif not isinstance(meta.get("attributes"), dict):
        found = meta.get("attributes")
        problem = "has no attributes" if found is None else (
            f"has attributes {str(found)[:80]!r}, not a JSON object"
        )  # fmt: skip
    else:
        return meta
    raise StoreError(f"{path}: {file} {problem}: it is not the metadata of a Zarr v3 group")


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages."""
    names = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")
