"""Reading a store: `Store`, a read-only view whose arrays load lazily and whose every read is
verified, and `summary`, what `symbnn store info` prints."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from symbnn.store import pinned
from symbnn.store.checks import (
    check_digest,
    check_integrity,
    check_trusted_architecture,
    has_digest,
    iter_chunks,
    positive_count,
    read_checked,
    unverified_notes,
)
from symbnn.store.digest import DIGEST
from symbnn.store.format import CHECKSUM, FORMAT, StoreError
from symbnn.store.layout import ArrayLayout, read_group_meta, read_layout
from symbnn.store.schema import check_dtypes


class Store:
    """Read-only view of a store. Arrays are read lazily; nothing loads the whole store.

    Opening checks the format (a store without a digest is refused unless
    ``allow_unverified``), that an architecture named by import path is trusted, the metadata
    (the recorded names, every array's shape against ``n_samples``), that every chunk file
    exists, the metadata against the manifest's copy and each data type against the schema;
    reads verify the chunks' checksums and that each is the chunk the manifest records.
    Each failure is a StoreError naming the store, array and chunk or what changed."""

    def __init__(self, path: str | os.PathLike, allow_unverified: bool | None = None) -> None:
        self.path = Path(path)
        group_meta = read_group_meta(self.path)
        attrs = dict(group_meta.get("attributes", {}))
        if attrs.get("format") != FORMAT:
            raise StoreError(
                f"{self.path}: attribute 'format' is {attrs.get('format')!r}, expected {FORMAT!r}"
            )
        self.sealed = has_digest(self.path, attrs, allow_unverified)
        check_trusted_architecture(self.path, attrs)
        self.attrs: dict[str, Any] = attrs
        self.state_names: list[str] = self._names("state_names")
        self.info_names: list[str] = self._names("info_names")
        self.n_samples: int = positive_count(self.path, attrs, "n_samples")
        self.checksummed: bool = attrs.get("checksum") == CHECKSUM
        self._layouts: dict[str, ArrayLayout] = {}
        for section, names in (("state", self.state_names), ("info", self.info_names)):
            for name in names:
                layout = read_layout(self.path, f"{section}/{name}")
                if not layout.shape or layout.shape[0] != self.n_samples:
                    found = layout.shape[0] if layout.shape else "no"
                    raise StoreError(
                        f"{self.path}: {section}/{name} has {found} samples, the store says "
                        f"{self.n_samples} (attribute n_samples): the store is inconsistent"
                    )
                self._layouts[layout.label] = layout
        check_integrity(self.path, list(self._layouts.values()), self.checksummed or self.sealed)
        self._recorded: dict[str, list[int]] | None = None
        if self.sealed:
            self._recorded = check_digest(self.path, group_meta, self._layouts)
        check_dtypes(self.path, self._layouts.values())
        try:  # every chunk read is held to the manifest's checksum (`pinned`)
            self._group = pinned.open_group(self.path, self._layouts, self._recorded)
        except Exception as exc:  # zarr raises several types for unreadable metadata
            raise StoreError(f"{self.path}: cannot open as a Zarr v3 group: {exc}") from exc
        self._arrays: dict[str, zarr.Array] = {}
        self._architecture_checked = False

    def _names(self, key: str) -> list[str]:
        names = self.attrs.get(key)
        if not isinstance(names, list) or not all(
            isinstance(n, str) and n and "/" not in n for n in names
        ):
            what = "missing" if names is None else f"{type(names).__name__} {names!r}"[:200]
            raise StoreError(
                f"{self.path}: attribute {key!r} is {what}, expected a list of array names "
                "(the store is damaged or was not written by symbnn)"
            )
        if len(set(names)) != len(names):
            raise StoreError(f"{self.path}: attribute {key!r} names an array twice")
        return list(names)

    def __repr__(self) -> str:
        return (
            f"Store({str(self.path)!r}, n_samples={self.n_samples}, arrays={len(self.state_names)})"
        )

    @property
    def digest(self) -> str | None:
        """The SHA-256 of the store's manifest: equal digests, equal stores."""
        return self.attrs.get(DIGEST) if self.sealed else None

    @property
    def architecture(self) -> dict[str, Any]:
        check_trusted_architecture(self.path, self.attrs)  # checked on open; kept as a guard
        return dict(self.attrs.get("architecture", {}))

    def check_architecture(self) -> None:
        """StoreError when the arrays are not the state_dict (names and per-sample shapes) of
        the network the ``architecture`` attribute describes. Builds that network on torch's
        meta device (no memory); skipped for stores without the attribute."""
        if self._architecture_checked or not self.attrs.get("architecture"):
            return
        import torch

        # local: keeps torch out of importing symbnn.store.reader
        from symbnn.models import build_model

        spec = self.architecture
        try:
            with torch.device("meta"):
                model = build_model(spec)
        except ValueError as exc:
            raise StoreError(f"{self.path}: attribute 'architecture' {spec}: {exc}") from exc
        expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
        missing = [name for name in expected if name not in self.state_names]
        extra = [name for name in self.state_names if name not in expected]
        if missing or extra:
            raise StoreError(
                f"{self.path}: the arrays are not those of the architecture {spec} it records "
                f"(missing: {', '.join(missing[:5]) or '-'}; unexpected: "
                f"{', '.join(extra[:5]) or '-'})"
            )
        for name, shape in expected.items():
            if self.shape(name) != shape:
                raise StoreError(
                    f"{self.path}: state/{name} holds samples of shape {self.shape(name)}, but "
                    f"the architecture {spec} it records has {shape}"
                )
        self._architecture_checked = True

    def layout(self, section: str, name: str) -> ArrayLayout:
        """Shape, chunks and item size of an array, as read when the store was opened."""
        names = self.state_names if section == "state" else self.info_names
        if name not in names:
            raise StoreError(f"{self.path}: no {section} array {name!r} (has: {', '.join(names)})")
        return self._layouts[f"{section}/{name}"]

    def _array(self, section: str, name: str) -> zarr.Array:
        key = self.layout(section, name).label
        if key not in self._arrays:
            try:
                self._arrays[key] = self._group[key]
            except Exception as exc:
                raise StoreError(
                    f"{self.path}: Zarr cannot open array {key} ({key}/zarr.json): {exc}"
                ) from exc
        return self._arrays[key]

    def state_array(self, name: str) -> zarr.Array:
        return self._array("state", name)

    def shape(self, name: str) -> tuple[int, ...]:
        """Shape of one sample of state entry ``name``."""
        return self.layout("state", name).shape[1:]

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: self.shape(name) for name in self.state_names}

    def _read(self, section: str, name: str, rows: Any = slice(None), oindex: bool = False):
        array = self._array(section, name)
        return read_checked(array, self.layout(section, name), rows, oindex)

    def read(self, name: str, rows: Any = slice(None)) -> np.ndarray:
        """State entry ``name`` for the selected samples, shape (k, *param_shape)."""
        return self._read("state", name, rows)

    def info(self, name: str, rows: Any = slice(None)) -> np.ndarray:
        return self._read("info", name, rows)

    def matrix(self, name: str, rows: Any = slice(None)) -> np.ndarray:
        """State entry ``name`` flattened to (k, d)."""
        values = self.read(name, rows)
        return values.reshape(values.shape[0], -1)

    def iter_sample_blocks(self, name: str) -> Iterator[tuple[int, np.ndarray]]:
        """(start_row, block) over the sample axis, aligned to chunks."""
        step = self.layout("state", name).chunks[0]
        for start in range(0, self.n_samples, step):
            yield start, self.read(name, slice(start, start + step))

    def iter_param_blocks(
        self, name: str, max_bytes: int = 64 * 2**20, rows: Any = slice(None)
    ) -> Iterator[tuple[int, int, np.ndarray]]:
        """(col_start, col_stop, block) over the flattened parameter axis of every selected
        sample: block has shape (k, col_stop - col_start); memory stays near ``max_bytes``."""
        layout = self.layout("state", name)
        shape = layout.shape[1:]
        if not shape:
            values = self._read("state", name, rows)
            yield 0, 1, values.reshape(-1, 1)
            return
        n_rows = len(range(self.n_samples)[rows]) if isinstance(rows, slice) else len(rows)
        per_slice = math.prod(shape[1:]) * layout.itemsize * max(1, n_rows)
        chunk_first = layout.chunks[1]
        step = max(1, max_bytes // max(1, per_slice))
        if chunk_first < shape[0]:  # the parameter axis is chunked: read whole chunks
            step = max(chunk_first, step // chunk_first * chunk_first)
        width = math.prod(shape[1:])
        for a in range(0, shape[0], step):
            b = min(shape[0], a + step)
            if isinstance(rows, slice):
                block = self._read("state", name, (rows, slice(a, b)))
            else:
                block = self._read("state", name, (np.asarray(rows), slice(a, b)), oindex=True)
            yield a * width, b * width, block.reshape(block.shape[0], -1)

    def state_dict(self, index: int) -> dict[str, Any]:
        """Sample ``index`` as a torch state_dict."""
        import torch

        self.check_architecture()
        return {
            name: torch.from_numpy(np.array(self.read(name, index))) for name in self.state_names
        }

    def state_dicts(self, rows: Any = slice(None)) -> dict[str, Any]:
        """Stacked torch tensors, name -> (k, *param_shape), for batched evaluation."""
        import torch

        self.check_architecture()
        return {name: torch.from_numpy(self.read(name, rows)) for name in self.state_names}

    def nbytes(self) -> int:
        return sum(math.prod(lay.shape) * lay.itemsize for lay in self._layouts.values())

    def validate(self, check_values: bool = True) -> list[str]:
        """Raise StoreError naming the array (and chunk) at fault if the store is inconsistent
        or damaged. The metadata and the presence of every chunk were checked when it was
        opened; here the recorded architecture is checked against the arrays and, with
        ``check_values``, every chunk is read (its checksum verified, and held to the
        manifest's as every read is) and float weights are checked for NaN/inf. Returns what could not be
        verified: empty for a store with a digest; for an older store opened with
        ``allow_unverified``, notes saying so (and naming absent chunks)."""
        self.check_architecture()
        layouts = list(self._layouts.values())
        if check_values:
            for layout in layouts:
                section, name = layout.label.split("/", 1)
                for index, block in iter_chunks(self._array(section, name), layout):
                    if section == "state" and block.dtype.kind == "f":
                        bad = ~np.isfinite(block)
                        if bad.any():
                            row = layout.slices(index)[0].start + int(np.argwhere(bad)[0][0])
                            raise StoreError(
                                f"{self.path}: state/{name} holds NaN or infinite weights "
                                f"(sample {row}, {layout.describe(index)})"
                            )
        return [] if self.sealed else unverified_notes(layouts, checksummed=self.checksummed)


def open_store(path: str | os.PathLike, allow_unverified: bool | None = None) -> Store:
    return Store(path, allow_unverified)


def summary(store: Store) -> dict[str, Any]:
    """What `symbnn store info` prints: architecture, samples, layers, shapes, bytes, converged."""
    converged = int(store.info("converged").sum()) if "converged" in store.info_names else None
    return {
        "path": str(store.path),
        "kind": store.attrs.get("kind"),
        "experiment": store.attrs.get("experiment"),
        "architecture": store.architecture,
        "n_samples": store.n_samples,
        "converged": converged,
        "n_arrays": len(store.state_names),
        "n_parameters": int(sum(math.prod(s) for s in store.shapes.values())),
        "bytes": store.nbytes(),
        "shapes": {name: list(shape) for name, shape in store.shapes.items()},
    }
