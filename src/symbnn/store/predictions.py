"""Reading predictions stores (the arrays `symbnn.predictions` writes): the format's array
names, the opened store (`Predictions`, checked on open as weight stores are) and the checks
that tell a predictions store from a weight store. No torch: the store upgrade, `symbnn store`
and the reports read predictions without a model.

The layout (docs/stores.md):

    <store>/zarr.json      attrs: format, format_version, experiment, method, variant,
                           n_samples, num_classes, predictive ("sampled", or "linearised" at
                           each sample's mode), checksum, digest
    <store>/manifest.json  the metadata as written and every chunk's checksum (its SHA-256 is
                           the digest)
    <store>/test           float16 (S, N, C) softmax probabilities on the in-distribution test set
    <store>/ood            float16 (S, M, C) the same on the out-of-distribution set
    <store>/labels         int64 (N,) test labels
    <store>/test_accuracy  float32 (S,) each sample's own top-1 accuracy
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from symbnn.store import (
    CHECKSUM,
    PREDICTIONS,
    ArrayLayout,
    StoreError,
    check_digest,
    check_integrity,
    has_digest,
    iter_chunks,
    open_store,
    pinned,
    positive_count,
    read_checked,
    read_group_meta,
    read_layout,
    unverified_notes,
)
from symbnn.store.schema import check_dtypes

FORMAT = PREDICTIONS
ARRAYS = ("test", "ood", "labels", "test_accuracy")


class CheckedArray:
    """A predictions array for reading: indexing as a Zarr array, with a failed read (a
    damaged chunk) reported as a StoreError naming the store, array and chunk."""

    def __init__(self, array: zarr.Array, layout: ArrayLayout) -> None:
        self._array, self.layout = array, layout

    shape = property(lambda self: self._array.shape)
    dtype = property(lambda self: self._array.dtype)
    ndim = property(lambda self: self._array.ndim)
    chunks = property(lambda self: self._array.chunks)

    def __len__(self) -> int:
        return self._array.shape[0]

    def __getitem__(self, selection: Any) -> np.ndarray:
        return read_checked(self._array, self.layout, selection)

    def iter_chunks(self) -> Iterator[tuple[tuple[int, ...], np.ndarray]]:
        return iter_chunks(self._array, self.layout)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        values = self[...]
        return values if dtype is None else values.astype(dtype)


class CheckedGroup:
    """The arrays of a predictions store by name (`CheckedArray` each) and its attributes."""

    def __init__(self, group: zarr.Group, layouts: dict[str, ArrayLayout]) -> None:
        self._group, self._layouts = group, layouts
        self._arrays: dict[str, CheckedArray] = {}
        self.attrs = dict(group.attrs)

    def __contains__(self, name: str) -> bool:
        return name in self._layouts

    def __getitem__(self, name: str) -> CheckedArray:
        if name not in self._layouts:
            raise KeyError(name)
        if name not in self._arrays:
            layout = self._layouts[name]
            try:
                array = self._group[name]
            except Exception as exc:  # zarr's own check of the metadata
                raise StoreError(
                    f"{layout.store}: Zarr cannot open array {name} ({name}/zarr.json): {exc}"
                ) from exc
            self._arrays[name] = CheckedArray(array, layout)
        return self._arrays[name]


@dataclass
class Predictions:
    """A predictions store opened for reading (arrays are read lazily, checksums verified)."""

    path: Path
    group: CheckedGroup
    checksummed: bool = False
    # the manifest's chunk checksums (label -> one per chunk); None without a digest
    recorded: dict[str, list[int]] | None = None

    @property
    def digest(self) -> str | None:
        return self.group.attrs.get("digest") if self.recorded is not None else None

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self.group.attrs)

    @property
    def n_samples(self) -> int:
        return int(self.group.attrs["n_samples"])

    def read(self, name: str, rows: Any = slice(None)) -> np.ndarray:
        if name not in ARRAYS:
            raise KeyError(f"{self.path}: no predictions array {name!r}")
        if name not in self.group:
            raise StoreError(f"{self.path}: the predictions store has no {name} array")
        return self.group[name][rows]

    def validate(self) -> list[str]:
        """Read every chunk; raise StoreError naming the array and chunk (or sample) when one
        is damaged, is not the chunk the manifest records, or holds NaN/inf or probability
        rows not summing to 1. Returns what could not be verified (a store without a digest,
        opened with ``allow_unverified``), as `Store.validate` does."""
        layouts = [self.group[name].layout for name in ARRAYS if name in self.group]
        for layout in layouts:
            for index, block in self.group[layout.label].iter_chunks():
                if layout.label not in ("test", "ood"):
                    continue
                block = block.astype(np.float32)
                first = layout.slices(index)[0].start
                for offset, probs in enumerate(block):
                    where = f"{layout.label}[{first + offset}]"
                    if not np.isfinite(probs).all():
                        raise StoreError(f"{self.path}: {where} holds NaN or inf")
                    if probs.size and np.abs(probs.sum(-1) - 1).max() > 1e-2:  # float16 storage
                        raise StoreError(f"{self.path}: {where} has rows that do not sum to 1")
        if self.recorded is not None:
            return []
        return unverified_notes(layouts, "predictions store", self.checksummed)


def is_predictions(path: str | os.PathLike) -> bool:
    """Whether the Zarr group at `path` says it is a predictions store (not a weight store);
    False for anything else (a malformed zarr.json is for the weight store's reader to
    name)."""
    try:
        meta = json.loads((Path(path) / "zarr.json").read_text())
    except (OSError, ValueError):
        return False
    attrs = meta.get("attributes") if isinstance(meta, dict) else None
    return isinstance(attrs, dict) and attrs.get("format") == FORMAT


def validate_any(path: str | os.PathLike) -> list[str]:
    """Read every chunk of a weight store or a predictions store, whichever `path` is; raise
    StoreError naming the damage, else return what could not be verified (empty when the
    store has checksums)."""
    if is_predictions(path):
        return open_predictions(path).validate()
    return open_store(path).validate(check_values=True)


def open_predictions(path: str | os.PathLike, allow_unverified: bool | None = None) -> Predictions:
    """Open a predictions store: its format (a store without a digest is refused unless
    ``allow_unverified``), its attributes, every array's shape against them, the presence of
    every chunk and the metadata against the manifest are checked."""
    path = Path(path)
    group_meta = read_group_meta(path, "predictions store")
    attrs = dict(group_meta.get("attributes", {}))
    if attrs.get("format") != FORMAT:
        raise StoreError(f"{path}: not a predictions store (format {attrs.get('format')!r})")
    sealed = has_digest(path, attrs, allow_unverified)
    s, c = (positive_count(path, attrs, key) for key in ("n_samples", "num_classes"))
    layouts = {
        name: read_layout(path, name)
        for name in ARRAYS
        if name in ("test", "ood") or (path / name / "zarr.json").exists()
    }
    test = layouts["test"].shape
    expected = {"test": (s, None, c), "ood": (s, None, c), "test_accuracy": (s,)}
    if "labels" in layouts:
        expected["labels"] = (test[1] if len(test) == 3 else None,)
    for name, want in expected.items():
        got = layouts[name].shape if name in layouts else None
        if got is not None and (
            len(got) != len(want) or any(w is not None and g != w for g, w in zip(got, want))
        ):
            shown = tuple("N" if w is None else w for w in want)
            raise StoreError(
                f"{path}: {name} has shape {got}, expected {shown} from the attributes "
                f"(n_samples={s}, num_classes={c}) and the test array {test}: the store is "
                "inconsistent"
            )
    checksummed = attrs.get("checksum") == CHECKSUM
    check_integrity(path, list(layouts.values()), checksummed or sealed)
    recorded = check_digest(path, group_meta, layouts) if sealed else None
    check_dtypes(path, layouts.values(), predictions=True)
    try:  # every chunk read is held to the manifest's checksum
        group = pinned.open_group(path, layouts, recorded)
    except Exception as exc:
        raise StoreError(f"{path}: not a predictions store ({exc})") from exc
    return Predictions(path, CheckedGroup(group, layouts), checksummed, recorded)
