"""Released networks -> a symbnn weight store, streamed: bundles are read member by member
and written in batches of bounded size, so memory does not grow with the bundle. The store
is staged and installed only when every requested network has been read and checked, so a
failed import (a corrupt bundle, a file of the wrong network, too few networks) leaves no
store behind."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from symbnn.checkpoints.mapping import NameMap
from symbnn.checkpoints.releases import (
    HUB_REPOSITORY,
    CheckpointError,
    architecture_of,
    release,
)
from symbnn.checkpoints.safetensors_io import parse
from symbnn.checkpoints.sources import find_bundles, iter_networks
from symbnn.settings.checkpoints import Checkpoints
from symbnn.store import Store, StoreWriter, open_store

LOG = logging.getLogger(__name__)

Annotate = Callable[[dict[str, Any], dict[str, np.ndarray]], dict[str, np.ndarray]]

DTYPES = {"float32": np.float32, "float16": np.float16}
# Networks are stacked and handed to the store writer in batches of about this size.
BATCH_BYTES = 64 * 2**20
# Networks from this size up (a ResNet-18: 22 MB in float16) are handed over one at a time.
LARGE_NETWORK_BYTES = 4 * 2**20
# info/source_file holds each network's "<bundle>:<file>" as UTF-8, zero-padded to this width
# (a store's info arrays are numeric).
NAME_BYTES = 256


def import_checkpoints(
    source: str | os.PathLike,
    out: str | os.PathLike,
    setting: str,
    *,
    first: int = Checkpoints.default("first"),
    count: int | None = None,
    dtype: Literal["float32", "float16"] = "float32",
    experiment: str | None = None,
    kind: str = "posterior",
    overwrite: bool = False,
    annotate: Annotate | None = None,
    attrs: dict[str, Any] | None = None,
) -> Store:
    """Import networks ``first .. first + count - 1`` (release indices; all from ``first`` when
    ``count`` is None) of the released ``setting`` found in ``source`` (a bundle, a folder of
    bundles or an untarred bundle) into the store ``out``, weights as ``dtype``.

    info/seed holds each network's release index (it stands in for the unknown training
    seed), info/source_file its bundle and file name (`source_files` decodes it).
    ``annotate(architecture, state)``, given a batch of networks (name -> stacked arrays),
    returns more info arrays for them (e.g. test accuracies); ``attrs`` are added to the
    store's attributes."""
    if dtype not in DTYPES:
        raise CheckpointError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if first < 0 or (count is not None and count < 1):
        raise CheckpointError(f"first={first}, count={count}: need first >= 0 and count >= 1")
    chosen = release(setting)
    bundles = find_bundles(source)
    stop = None if count is None else first + count
    attrs = {"experiment": experiment or f"imported-{setting}", **(attrs or {})}
    started = time.perf_counter()
    with StoreWriter(
        out,
        attrs,
        kind=kind,
        expected_samples=count or _announced(bundles, first),
        overwrite=overwrite,
    ) as writer:
        networks = iter_networks(bundles, first, stop)
        read = _write_networks(writer, networks, chosen, DTYPES[dtype], annotate)
        _check_complete(source, read.indices, first, count)
        writer.attrs.update(
            {
                "architecture": read.name_map.architecture,
                "source": _source_attrs(setting, bundles, read, dtype),
            }
        )
    seconds = time.perf_counter() - started
    LOG.info(
        "imported %d %s networks into %s in %.1f s (%.0f networks/s)",
        len(read.indices),
        setting,
        out,
        seconds,
        len(read.indices) / max(seconds, 1e-9),
    )
    return open_store(out)


@dataclass
class _Read:
    """What the networks of an import were: their names' mapping, release indices and the
    float dtypes their files hold (float16 as released)."""

    name_map: NameMap | None = None
    indices: set[int] = field(default_factory=set)
    source_dtypes: set[str] = field(default_factory=set)


def _write_networks(writer: StoreWriter, networks, chosen, dtype: type, annotate) -> _Read:
    """Convert each network to the store's names and ``dtype`` and hand them to ``writer`` in
    batches of bounded size."""
    read = _Read()
    batch = Batch(dtype)
    for network in networks:
        if network.index in read.indices:
            raise CheckpointError(
                f"{network.source}: a second network with release index {network.index} "
                "(do two bundles overlap?)"
            )
        read.indices.add(network.index)
        tensors = parse(network.data, network.source)
        if read.name_map is None:
            read.name_map = NameMap.build(chosen, architecture_of(chosen, tensors, network.source))
        read.source_dtypes.update(str(v.dtype) for v in tensors.values() if v.dtype.kind == "f")
        batch.add(
            network.index,
            network.source,
            read.name_map.convert(tensors, network.source, batch.dtype),
        )
        # a large network goes alone, as a view: stacking would copy its bytes once more
        if batch.nbytes >= BATCH_BYTES or batch.nbytes >= LARGE_NETWORK_BYTES * batch.rows:
            writer.append(*_annotated(batch, read.name_map, annotate))
    if batch.rows:
        writer.append(*_annotated(batch, read.name_map, annotate))
    return read


def _source_attrs(setting: str, bundles, read: _Read, dtype: str) -> dict[str, Any]:
    """The store's ``source`` attribute: where its networks came from and how they were
    converted."""
    return {
        "kind": "checkpoints",
        "setting": setting,
        "hub_repository": HUB_REPOSITORY,
        "bundles": [bundle.label for bundle in bundles],
        "first": min(read.indices),
        "count": len(read.indices),
        "source_dtype": ",".join(sorted(read.source_dtypes)),
        "stored_dtype": dtype,
        "conversion": _conversion(read.source_dtypes, dtype),
    }


def _conversion(source_dtypes: set[str], dtype: str) -> str:
    """What storing the files' floats as ``dtype`` did to them, in words."""
    if source_dtypes == {dtype}:
        return "none"
    widths = {name: np.dtype(name).itemsize for name in (*source_dtypes, dtype)}
    if all(widths[name] <= widths[dtype] for name in source_dtypes):
        return f"{','.join(sorted(source_dtypes))} widened to {dtype} (exact)"
    return f"{','.join(sorted(source_dtypes))} rounded to {dtype}"


def _annotated(batch: Batch, name_map: NameMap, annotate: Annotate | None):
    state, info = batch.take()
    if annotate is not None:
        info.update(annotate(name_map.architecture, state))
    return state, info


class Batch:
    """Networks waiting to be stacked and written: their arrays, indices and names."""

    def __init__(self, dtype: type) -> None:
        self.dtype = np.dtype(dtype)
        self._states: list[dict[str, np.ndarray]] = []
        self._indices: list[int] = []
        self._names: list[bytes] = []
        self.nbytes = 0

    @property
    def rows(self) -> int:
        return len(self._states)

    def add(self, index: int, source: str, state: dict[str, np.ndarray]) -> None:
        encoded = source.encode()
        if len(encoded) > NAME_BYTES:
            raise CheckpointError(f"{source}: the name is longer than {NAME_BYTES} bytes")
        self._states.append(state)
        self._indices.append(index)
        self._names.append(encoded)
        self.nbytes += sum(value.nbytes for value in state.values())

    def take(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        names = list(self._states[0])
        if len(self._states) == 1:  # a view with a leading axis of 1, no copy
            state = {name: self._states[0][name][np.newaxis] for name in names}
        else:
            state = {name: np.stack([s[name] for s in self._states]) for name in names}
        info = {
            "seed": np.asarray(self._indices, dtype=np.int64),
            "source_file": _encode(self._names),
        }
        self.__init__(self.dtype)
        return state, info


def _encode(names: list[bytes]) -> np.ndarray:
    out = np.zeros((len(names), NAME_BYTES), dtype=np.uint8)
    for row, name in enumerate(names):
        out[row, : len(name)] = np.frombuffer(name, dtype=np.uint8)
    return out


def source_files(store: Store, rows: Any = slice(None)) -> list[str]:
    """The "<bundle>:<file>" each imported network of ``store`` came from."""
    raw = store.info("source_file", rows)
    return [bytes(row).rstrip(b"\0").decode() for row in np.atleast_2d(raw)]


def _announced(bundles, first: int) -> int | None:
    """Networks the bundles' names announce from ``first`` on (a chunking hint only)."""
    if any(b.first is None or b.last is None for b in bundles):
        return None
    total = sum(max(0, b.last - max(b.first, first) + 1) for b in bundles)
    return total or None


def _check_complete(source, indices: set[int], first: int, count: int | None) -> None:
    if not indices:
        raise CheckpointError(f"{source}: holds no network from release index {first} on")
    if count is not None and len(indices) < count:
        raise CheckpointError(
            f"{source}: asked for {count} networks from release index {first}, found "
            f"{len(indices)} ({first}..{max(indices)}); nothing was imported"
        )
