"""The one reader and writer of symbnn's weight stores (Zarr v3).

A store is a Zarr group holding many networks of one architecture:

    <store>/zarr.json           group attributes (format, kind, architecture, experiment, ...)
    <store>/state/<name>        one array per state_dict entry, shape (n_samples, *param_shape)
    <store>/info/<name>         per-sample arrays with leading axis n_samples: seed, converged,
                                test_accuracy, and whatever a step adds (permutations, scales)

Arrays are chunked along the sample axis (a chunk is a few MiB); a sample too large for that
also splits its first parameter axis, so a column block of every sample can be streamed with
memory bounded by the block, not by the layer. Arrays are stored uncompressed: compression
saves ~8% on float weights and halves throughput.

Writes are atomic: a store is built in a hidden sibling folder and renamed into place when
complete, so a killed job never leaves a half-written store that a later step would read.
Readers address arrays by the names recorded in the attributes, never by listing folders, so
bookkeeping files such as Snakemake's ``.snakemake_timestamp`` are never read as data.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import zarr

import symbnn

FORMAT = "symbnn-store"
FORMAT_VERSION = 1
CHUNK_TARGET_BYTES = 4 * 2**20
# Rows kept together when a sample is too large for one chunk; also the floor that makes
# column-block reads over all samples cheap.
MIN_CHUNK_ROWS = 64
WRITE_BUFFER_BYTES = 256 * 2**20


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


def staging_path(path: Path) -> Path:
    """A hidden sibling of ``path``, unique to this process, to build a store in."""
    return path.parent / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def remove_stale_staging(path: Path) -> None:
    """Remove what killed runs left while building ``path``."""
    for stale in path.parent.glob(f".{path.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)


def install(tmp: Path, path: Path, overwrite: bool) -> None:
    """Move a finished store into place; an empty folder (e.g. pre-created) is replaced."""
    if path.exists():
        leftovers = [p for p in path.iterdir() if p.name != ".snakemake_timestamp"]
        if leftovers and not overwrite:
            shutil.rmtree(tmp, ignore_errors=True)
            raise StoreError(
                f"{path}: refusing to overwrite an existing store (pass overwrite=True)"
            )
        shutil.rmtree(path)
    os.replace(tmp, path)


@contextlib.contextmanager
def staged_folder(path: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """A temporary folder to build the store ``path`` in: installed at ``path`` when the
    block exits cleanly, removed when it raises, so no reader ever sees half a store."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(path)
    tmp: Path | None = staging_path(path)
    try:
        yield tmp
        install(tmp, path, overwrite)
        tmp = None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


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
        self._group = zarr.open_group(self._tmp, mode="w", zarr_format=3)
        self._group.create_group("state")
        self._group.create_group("info")
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
        state = {k: np.concatenate([b[0][k] for b in self._buffer]) for k in self._state_names}
        info = {k: np.concatenate([b[1][k] for b in self._buffer]) for k in self._info_names}
        self._buffer, self._buffered_rows, self._buffered_bytes = [], 0, 0
        for section, arrays in (("state", state), ("info", info)):
            for name, values in arrays.items():
                key = f"{section}/{name}"
                if self.n_samples == 0:
                    n_hint = max(self.expected or 0, values.shape[0])
                    self._group.create_array(
                        key,
                        shape=values.shape,
                        dtype=values.dtype,
                        compressors=None,
                        chunks=chunk_shape(n_hint, values.shape[1:], values.dtype.itemsize),
                        fill_value=0,
                    )[...] = values
                else:
                    self._group[key].append(values, axis=0)
        self.n_samples += next(iter(state.values())).shape[0]

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
        self._group.attrs.update(
            {
                **self.attrs,
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "kind": self.kind,
                "symbnn_version": symbnn.__version__,
                "state_names": self._state_names,
                "info_names": self._info_names,
                "n_samples": self.n_samples,
            }
        )


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


class Store:
    """Read-only view of a store. Arrays are read lazily; nothing loads the whole store."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if not (self.path / "zarr.json").is_file():
            raise StoreError(
                f"{self.path}: not a symbnn store (no zarr.json; missing or half-written)"
            )
        try:
            self._group = zarr.open_group(self.path, mode="r", zarr_format=3)
        except Exception as exc:  # zarr raises several types for unreadable metadata
            raise StoreError(f"{self.path}: cannot open as a Zarr v3 group: {exc}") from exc
        attrs = dict(self._group.attrs)
        if attrs.get("format") != FORMAT:
            raise StoreError(
                f"{self.path}: attribute 'format' is {attrs.get('format')!r}, expected {FORMAT!r}"
            )
        if attrs.get("format_version") != FORMAT_VERSION:
            raise StoreError(
                f"{self.path}: unsupported format_version {attrs.get('format_version')!r}"
            )
        self.attrs: dict[str, Any] = attrs
        self.state_names: list[str] = list(attrs["state_names"])
        self.info_names: list[str] = list(attrs["info_names"])
        self.n_samples: int = int(attrs["n_samples"])

    def __repr__(self) -> str:
        return (
            f"Store({str(self.path)!r}, n_samples={self.n_samples}, arrays={len(self.state_names)})"
        )

    @property
    def architecture(self) -> dict[str, Any]:
        return dict(self.attrs.get("architecture", {}))

    def _array(self, section: str, name: str) -> zarr.Array:
        names = self.state_names if section == "state" else self.info_names
        if name not in names:
            raise StoreError(f"{self.path}: no {section} array {name!r} (has: {', '.join(names)})")
        try:
            return self._group[f"{section}/{name}"]
        except Exception as exc:
            raise StoreError(
                f"{self.path}: array {section}/{name} is missing or unreadable: {exc}"
            ) from exc

    def state_array(self, name: str) -> zarr.Array:
        return self._array("state", name)

    def shape(self, name: str) -> tuple[int, ...]:
        """Shape of one sample of state entry ``name``."""
        return tuple(self.state_array(name).shape[1:])

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: self.shape(name) for name in self.state_names}

    def _read(self, section: str, name: str, rows: Any = slice(None)) -> np.ndarray:
        array = self._array(section, name)
        try:
            return np.asarray(array[rows])
        except Exception as exc:
            raise StoreError(
                f"{self.path}: cannot read {section}/{name} (corrupted chunk?): {exc}"
            ) from exc

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
        step = self.state_array(name).chunks[0]
        for start in range(0, self.n_samples, step):
            yield start, self.read(name, slice(start, start + step))

    def iter_param_blocks(
        self, name: str, max_bytes: int = 64 * 2**20, rows: Any = slice(None)
    ) -> Iterator[tuple[int, int, np.ndarray]]:
        """(col_start, col_stop, block) over the flattened parameter axis of every selected
        sample: block has shape (k, col_stop - col_start); memory stays near ``max_bytes``."""
        array = self.state_array(name)
        shape = array.shape[1:]
        if not shape:
            values = self._read("state", name, rows)
            yield 0, 1, values.reshape(-1, 1)
            return
        n_rows = len(range(self.n_samples)[rows]) if isinstance(rows, slice) else len(rows)
        per_slice = math.prod(shape[1:]) * array.dtype.itemsize * max(1, n_rows)
        chunk_first = array.chunks[1]
        step = max(1, max_bytes // max(1, per_slice))
        if chunk_first < shape[0]:  # the parameter axis is chunked: read whole chunks
            step = max(chunk_first, step // chunk_first * chunk_first)
        width = math.prod(shape[1:])
        for a in range(0, shape[0], step):
            b = min(shape[0], a + step)
            index = (
                (rows, slice(a, b)) if isinstance(rows, slice) else (np.asarray(rows), slice(a, b))
            )
            try:
                block = np.asarray(array[index] if isinstance(rows, slice) else array.oindex[index])
            except Exception as exc:
                raise StoreError(
                    f"{self.path}: cannot read state/{name} (corrupted chunk?): {exc}"
                ) from exc
            yield a * width, b * width, block.reshape(block.shape[0], -1)

    def state_dict(self, index: int) -> dict[str, Any]:
        """Sample ``index`` as a torch state_dict."""
        import torch

        return {
            name: torch.from_numpy(np.array(self.read(name, index))) for name in self.state_names
        }

    def state_dicts(self, rows: Any = slice(None)) -> dict[str, Any]:
        """Stacked torch tensors, name -> (k, *param_shape), for batched evaluation."""
        import torch

        return {name: torch.from_numpy(self.read(name, rows)) for name in self.state_names}

    def nbytes(self) -> int:
        arrays = [
            self._array(section, name)
            for section, names in (("state", self.state_names), ("info", self.info_names))
            for name in names
        ]
        return sum(math.prod(array.shape) * array.dtype.itemsize for array in arrays)

    def validate(self, check_values: bool = True) -> None:
        """Raise StoreError naming the array at fault if the store is inconsistent; with
        ``check_values`` every chunk is read (catches truncated chunks) and float weights
        are checked for NaN/inf."""
        for section, names in (("state", self.state_names), ("info", self.info_names)):
            for name in names:
                array = self._array(section, name)
                if array.shape[0] != self.n_samples:
                    raise StoreError(
                        f"{self.path}: {section}/{name} has {array.shape[0]} samples, "
                        f"the store says {self.n_samples}"
                    )
        if not check_values:
            return
        for name in self.state_names:
            for _, block in self.iter_sample_blocks(name):
                if block.dtype.kind == "f" and not np.isfinite(block).all():
                    raise StoreError(f"{self.path}: state/{name} holds NaN or infinite weights")
        for name in self.info_names:
            self.info(name)


def open_store(path: str | os.PathLike) -> Store:
    return Store(path)


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
