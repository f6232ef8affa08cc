"""Writing a store: `StoreWriter` appends batches of samples to a staged store, `write_store`
writes one in one go."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import zarr

import symbnn
from symbnn.store.banded_array import BandedArray, checksummed
from symbnn.store.digest import DIGEST
from symbnn.store.format import (
    ARRAY_CONFIG,
    CHECKSUM,
    CHECKSUM_CODECS,
    FORMAT,
    FORMAT_VERSION,
    UPGRADED,
    StoreError,
    chunk_shape,
)
from symbnn.store.reader import Store, open_store
from symbnn.store.staging import seal, staged_folder, writing

WRITE_BUFFER_BYTES = 256 * 2**20


class StoreWriter:
    """Build a store atomically, appending batches of samples.

    Use as a context manager; the store appears at ``path`` only when the block exits
    without an exception::

        with StoreWriter(path, attrs={...}, expected_samples=1000) as w:
            w.append(state={"fc.weight": arr}, info={"seed": seeds})
    """

    def __init__(
        self,
        path: str | os.PathLike,
        attrs: Mapping[str, Any],
        *,
        kind: str = "posterior",
        expected_samples: int | None = None,
        overwrite: bool = False,
    ) -> None:
        self.path = Path(path)
        self.attrs = dict(attrs)
        self.kind = kind
        self.expected = expected_samples
        self.overwrite = overwrite
        self._tmp: Path | None = None
        self._group: zarr.Group | None = None
        self._state_names: list[str] | None = None
        self._info_names: list[str] | None = None
        self._buffer: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] = []
        self._buffered_rows = 0
        self._buffered_bytes = 0
        self.n_samples = 0

    def __enter__(self) -> StoreWriter:
        self._stage = staged_folder(self.path, self.overwrite)
        self._tmp = self._stage.__enter__()
        try:
            with writing(self.path):
                self._group = zarr.open_group(self._tmp, mode="w", zarr_format=3)
                self._group.create_group("state")
                self._group.create_group("info")
        except BaseException:
            self._stage.__exit__(*sys.exc_info())
            raise
        self._arrays: dict[str, zarr.Array] = {}
        self._banded: dict[str, BandedArray] = {}
        return self

    def append(self, state: Mapping[str, Any], info: Mapping[str, Any] | None = None) -> None:
        """Append k samples: every state array has shape (k, *param_shape), every info (k, ...)."""
        if self._group is None:
            raise RuntimeError("StoreWriter.append outside its `with` block")
        state = {name: _as_numpy(value) for name, value in state.items()}
        info = {name: _as_numpy(value) for name, value in (info or {}).items()}
        if self._state_names is None:
            self._state_names, self._info_names = list(state), list(info)
        if list(state) != self._state_names or sorted(info) != sorted(self._info_names):
            raise StoreError(
                f"{self.path}: appended arrays {sorted(state)} / {sorted(info)} differ from the "
                f"first batch's {sorted(self._state_names)} / {sorted(self._info_names)}"
            )
        rows = {a.shape[0] if a.ndim else -1 for a in (*state.values(), *info.values())}
        if len(rows) != 1 or -1 in rows:
            raise StoreError(
                f"{self.path}: appended arrays disagree on the number of samples: {sorted(rows)}"
            )
        self._buffer.append((state, info))
        self._buffered_rows += rows.pop()
        self._buffered_bytes += sum(a.nbytes for a in (*state.values(), *info.values()))
        if self._buffered_bytes >= WRITE_BUFFER_BYTES or (
            self.expected is not None and self._buffered_rows >= self.expected
        ):
            self._flush()

    def _flush(self) -> None:
        if not self._buffer:
            return
        parts = {
            **{f"state/{k}": [b[0][k] for b in self._buffer] for k in self._state_names},
            **{f"info/{k}": [b[1][k] for b in self._buffer] for k in self._info_names},
        }
        rows = self._buffered_rows
        self._buffer, self._buffered_rows, self._buffered_bytes = [], 0, 0
        with writing(self.path):
            for key, batches in parts.items():
                if self.n_samples == 0:
                    self._create(key, batches, rows)
                elif key in self._banded:  # band by band: no need to join the batches first
                    for values in batches:
                        self._banded[key].append(values)
                else:
                    # the handle keeps ARRAY_CONFIG: a reopened array would skip zero chunks
                    self._arrays[key].append(_joined(batches), axis=0)
        self.n_samples += rows

    def _create(self, key: str, batches: list[np.ndarray], rows: int) -> None:
        """The array ``key`` holding the ``rows`` rows of ``batches``. An array whose chunks
        split the first parameter axis (large samples) is written band by band
        (`BandedArray`): appends that end inside a band would otherwise rewrite the band's
        chunks at every flush."""
        sample_shape, dtype = batches[0].shape[1:], batches[0].dtype
        chunks = chunk_shape(max(self.expected or 0, rows), sample_shape, dtype.itemsize)
        banded = len(sample_shape) >= 1 and chunks[1] < sample_shape[0]
        array = self._group.create_array(
            key,
            shape=(0 if banded else rows, *sample_shape),
            dtype=dtype,
            compressors=CHECKSUM_CODECS,
            chunks=chunks,
            fill_value=0,
            config=ARRAY_CONFIG,
        )
        self._arrays[key] = array
        if banded and checksummed(array) is not None:
            self._banded[key] = BandedArray(array, self._tmp / key)
            for values in batches:
                self._banded[key].append(values)
        else:  # codecs BandedArray does not write (compression): Zarr's own appends
            array.resize((rows, *sample_shape))
            array[...] = _joined(batches)

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self._finish()
        except BaseException:
            self._stage.__exit__(*sys.exc_info())
            raise
        else:
            self._stage.__exit__(exc_type, exc, tb)
        finally:
            self._group = None

    def _finish(self) -> None:
        self._flush()
        if self.n_samples == 0:
            raise StoreError(f"{self.path}: no samples were written")
        with writing(self.path):
            for banded in self._banded.values():
                banded.finish()
            self._group.attrs.update(
                {
                    # a source store's own records (attrs are often copied from one) dropped
                    **{k: v for k, v in self.attrs.items() if k not in (DIGEST, UPGRADED)},
                    "format": FORMAT,
                    "format_version": FORMAT_VERSION,
                    "kind": self.kind,
                    "symbnn_version": symbnn.__version__,
                    "state_names": self._state_names,
                    "info_names": self._info_names,
                    "n_samples": self.n_samples,
                    "checksum": CHECKSUM,
                }
            )
            labels = [f"state/{n}" for n in self._state_names]
            seal(self._tmp, labels + [f"info/{n}" for n in self._info_names], self.path)


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """The batches of one array end to end; a single batch as it is (no copy: a store of
    large networks is often appended in one batch)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def write_store(
    path: str | os.PathLike,
    state: Mapping[str, Any],
    info: Mapping[str, Any] | None = None,
    attrs: Mapping[str, Any] | None = None,
    *,
    kind: str = "posterior",
    overwrite: bool = False,
) -> Store:
    """Write a whole store in one go (atomically) and open it for reading."""
    n = len(next(iter(state.values())))
    with StoreWriter(
        path, attrs or {}, kind=kind, expected_samples=n, overwrite=overwrite
    ) as writer:
        writer.append(state, info)
    return open_store(path)


def _as_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.ascontiguousarray(value)
