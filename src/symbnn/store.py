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

Integrity (docs/stores.md): every chunk carries a CRC-32C checksum (Zarr v3's ``crc32c``
codec) and every chunk is written, all-zero ones included (the store's attribute
``checksum: crc32c`` says so). The writer ends with a manifest (`symbnn.store_digest`: the
metadata as written and every chunk's checksum) whose SHA-256 is the group attribute
``digest``. Opening a store checks its metadata (names, shapes against ``n_samples``, one
checksum per array), that every chunk file exists (a directory listing, no data read) and
that the metadata is what the manifest recorded; every read verifies the checksums of the
chunks it touches; `Store.validate` reads every chunk and checks it against the manifest too.
So a missing, truncated, bit-flipped or swapped chunk and an edited attribute or array
metadata are errors naming what changed, never a number computed from Zarr's fill value or
from damaged bytes. Stores of the format before the digest (format_version 1) are refused
with the remedy (`symbnn store upgrade`), or opened with a warning under `allow_unverified`.

A store never makes symbnn import code: an ``architecture`` naming a model by import path
opens only if the user trusts that path (`symbnn.trust`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import shutil
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zarr

import symbnn
from symbnn import chunk_checksums, trust
from symbnn.atomic import atomic_write
from symbnn.banded_array import BandedArray, checksummed
from symbnn.store_digest import (
    DIGEST,
    MANIFEST,
    changes,
    digest_of,
    group_changes,
    manifest_bytes,
    parse_manifest,
)

FORMAT = "symbnn-store"
PREDICTIONS = "symbnn-predictions"  # the format of predictions stores (`symbnn.predictions`)
# 2: a manifest and its digest cover the metadata and every chunk's checksum
FORMAT_VERSION = 2
CHUNK_TARGET_BYTES = 4 * 2**20
# Rows kept together when a sample is too large for one chunk; also the floor that makes
# column-block reads over all samples cheap.
MIN_CHUNK_ROWS = 64
WRITE_BUFFER_BYTES = 256 * 2**20
# Every array: one CRC-32C per chunk, and every chunk written (Zarr skips all-zero chunks by
# default, which makes a deleted chunk indistinguishable from a zero one).
CHECKSUM = "crc32c"
ARRAY_CONFIG = {"write_empty_chunks": True}
CHECKSUM_CODECS = (chunk_checksums.BackgroundCrc32c(),)
# Zarr reads every crc32c array through symbnn's implementation (same format, faster reads).
chunk_checksums.install()
# How a damaged store is repaired, appended to the messages that report one.
REMEDY = "restore it (`make verify` names intact copies) or rerun the step that wrote it"
# The attribute `symbnn store upgrade` records (from which format; values verified or not).
UPGRADED = "upgraded"
# Whether stores without a digest open (with a warning): `symbnn --allow-unverified`.
_unverified = {"allowed": False, "warned": set()}


class StoreError(Exception):
    """A store is missing, malformed, inconsistent or corrupted; the message names the culprit."""


@dataclass(frozen=True)
class ArrayLayout:
    """What checking an array's chunks needs, read from its ``zarr.json`` (no data read)."""

    store: Path  # the store (group) folder, for messages
    label: str  # the array's path inside the store, e.g. "state/fc1.weight"
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
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
        if meta.get("node_type") != "array":
            raise ValueError(f"node_type is {meta.get('node_type')!r}, not 'array'")
        if meta["chunk_grid"]["name"] != "regular":
            raise ValueError(f"chunk grid {meta['chunk_grid']['name']!r} is not regular")
        shape = tuple(int(n) for n in meta["shape"])
        chunks = tuple(int(n) for n in meta["chunk_grid"]["configuration"]["chunk_shape"])
        if len(chunks) != len(shape) or min(chunks, default=1) < 1:
            raise ValueError(f"chunk shape {chunks} does not fit shape {shape}")
        encoding = meta.get("chunk_key_encoding", {})
        if encoding.get("name", "default") != "default":
            raise ValueError(f"chunk key encoding {encoding.get('name')!r} is not 'default'")
        separator = encoding.get("configuration", {}).get("separator", "/")
        codecs = [codec.get("name") for codec in meta.get("codecs", [])]
        itemsize = np.dtype(meta["data_type"]).itemsize
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StoreError(f"{store}: malformed metadata of {label} ({meta_path}): {exc}") from exc
    return ArrayLayout(
        store=store,
        label=label,
        shape=shape,
        chunks=chunks,
        itemsize=itemsize,
        separator=separator,
        checksum=bool(codecs) and codecs[-1] == CHECKSUM,
        plain=codecs in (["bytes"], ["bytes", CHECKSUM]),
        meta=meta,
    )


def positive_count(path: Path, attrs: Mapping[str, Any], key: str) -> int:
    """The attribute ``key`` (n_samples, num_classes, ...); StoreError unless a positive int."""
    value = attrs.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise StoreError(
            f"{path}: attribute {key!r} is {value!r}, expected a positive integer "
            "(the store is damaged or was not written by symbnn)"
        )
    return value


def check_integrity(path: Path, layouts: Sequence[ArrayLayout], checksummed: bool) -> None:
    """For a store whose attributes say it has checksums: every array has them and every
    chunk file exists (a listing, no data read). Stores written before checksums pass."""
    if not checksummed:
        return
    for layout in layouts:
        if not layout.checksum:
            raise StoreError(
                f"{path}: {layout.label} has no crc32c checksum although the store says every "
                f"array has one: the store is inconsistent; {REMEDY}"
            )
    check_chunks_present(layouts)


def check_chunks_present(layouts: Sequence[ArrayLayout]) -> None:
    """StoreError naming the first array with a missing chunk file (a listing, no data read)."""
    for layout in layouts:
        missing = layout.missing()
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            raise StoreError(
                f"{layout.store}: cannot read {layout.label}: {layout.describe(missing[0])} is "
                f"missing{more}; the store is incomplete or damaged: {REMEDY}"
            )


def allow_unverified(allowed: bool = True) -> None:
    """Whether stores without a digest (format_version 1) open, with a warning, instead of
    being refused: `symbnn --allow-unverified`."""
    _unverified["allowed"] = allowed


def read_group_meta(path: Path, what: str = "symbnn store") -> dict[str, Any]:
    """The content of the group's ``zarr.json``; StoreError when it is missing or malformed."""
    try:
        meta = json.loads((path / "zarr.json").read_text())
    except FileNotFoundError:
        raise StoreError(f"{path}: not a {what} (no zarr.json; missing or half-written)") from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: cannot read zarr.json: {exc}") from exc
    if not isinstance(meta, dict) or not isinstance(meta.get("attributes", {}), dict):
        raise StoreError(f"{path}: zarr.json is not the metadata of a Zarr group")
    return meta


def upgrade_remedy(path: Path) -> str:
    return (
        f"run `symbnn store upgrade {path}` (it verifies every chunk and records a digest; "
        "`make upgrade-stores` upgrades every store under the results folder), or pass "
        "`symbnn --allow-unverified` to read it unverified"
    )


def has_digest(path: Path, attrs: Mapping[str, Any], allow: bool | None = None) -> bool:
    """True for a store of the current format, with a digest to check. A store of the format
    before it (no digest, no manifest) is a StoreError giving the remedy unless ``allow``
    (default: `allow_unverified`'s setting, which also prints a warning), when it opens
    unverified (False). A store
    written with a manifest must keep its digest and format_version: an edit of either can
    never turn it into an unverified one."""
    version, digest = attrs.get("format_version"), attrs.get(DIGEST)
    if version == FORMAT_VERSION and isinstance(digest, str):
        return True
    if (path / MANIFEST).exists():
        problem = (
            f"its format_version is {version!r}"
            if version != FORMAT_VERSION
            else f"its attribute {DIGEST!r} is {'missing' if digest is None else repr(digest)}"
        )
        raise StoreError(
            f"{path}: the store was written with a digest ({MANIFEST} is there), but {problem}: "
            f"its metadata was changed after it was written; {REMEDY}"
        )
    if version not in (None, 1, FORMAT_VERSION):
        raise StoreError(
            f"{path}: unsupported format_version {version!r} (this symbnn reads {FORMAT_VERSION})"
        )
    if not (_unverified["allowed"] if allow is None else allow):
        raise StoreError(
            f"{path}: written in an older store format (format_version {version}, no digest "
            f"of its metadata), which symbnn does not read unverified: {upgrade_remedy(path)}"
        )
    if allow is None and path not in _unverified["warned"]:  # allowed by --allow-unverified
        _unverified["warned"].add(path)
        print(
            f"symbnn: warning: {path}: reading a store without a digest (format_version "
            f"{version}): changes to its metadata cannot be detected",
            file=sys.stderr,
        )
    return False


def check_digest(
    path: Path, group_meta: Mapping[str, Any], layouts: Mapping[str, ArrayLayout]
) -> dict[str, list[int]]:
    """Check the store's metadata against its manifest (and the manifest against the digest)
    and return the manifest's chunk checksums, label -> one per chunk in C order. StoreError
    naming what changed: the manifest, an attribute, an array's metadata."""
    digest = group_meta["attributes"][DIGEST]
    try:
        data = (path / MANIFEST).read_bytes()
    except OSError as exc:
        raise StoreError(
            f"{path}: cannot read {MANIFEST} ({exc.strerror or exc}), so the store's digest "
            f"cannot be checked: the store is incomplete; {REMEDY}"
        ) from None
    if digest_of(data) != digest:
        raise StoreError(
            f"{path}: {MANIFEST} does not match the store's digest (attribute {DIGEST!r}): the "
            f"manifest or the digest was changed after the store was written; {REMEDY}"
        )
    try:
        manifest = parse_manifest(data)
    except ValueError as exc:
        raise StoreError(f"{path}: malformed {MANIFEST}: {exc}; {REMEDY}") from None
    found = group_changes(manifest, group_meta)
    if found:
        raise StoreError(
            f"{path}: the store's metadata was changed after it was written: "
            f"{'; '.join(found[:3])}; {REMEDY}"
        )
    recorded = manifest["arrays"]
    if set(recorded) != set(layouts):
        odd = sorted(set(recorded) ^ set(layouts))
        raise StoreError(f"{path}: {MANIFEST} and the store disagree on the arrays {odd}; {REMEDY}")
    checksums = {}
    for label, layout in layouts.items():
        entry = recorded[label]
        found = changes("key", entry.get("metadata", {}), layout.meta)
        if found:
            raise StoreError(
                f"{path}: the metadata of {label} ({label}/zarr.json) was changed after the "
                f"store was written: {'; '.join(found[:3])}; {REMEDY}"
            )
        crcs = entry.get("crc32c")
        if not isinstance(crcs, list) or len(crcs) != math.prod(layout.grid):
            raise StoreError(f"{path}: {MANIFEST} lists no checksum per chunk of {label}")
        checksums[label] = crcs
    return checksums


def seal(folder: Path, labels: Sequence[str], where: Path | None = None) -> str:
    """Write the manifest of the store in ``folder`` (arrays ``labels``, every chunk written
    with a crc32c checksum) and record its digest in the group attributes; returns the
    digest. The last step of every store writer; each file is replaced atomically."""
    where = where or folder
    group_meta = read_group_meta(folder)
    arrays = {}
    for label in labels:
        layout = read_layout(folder, label)
        if not layout.checksum:
            raise StoreError(f"{where}: {label} has no crc32c checksum to record in {MANIFEST}")
        crcs = [layout.stored_checksum(index) for index in layout.indices()]
        if None in crcs:
            index = list(layout.indices())[crcs.index(None)]
            raise chunk_error(layout, index, "is missing or unreadable")
        arrays[label] = (layout.meta, crcs)
    data = manifest_bytes(group_meta, arrays)
    digest = digest_of(data)
    group_meta["attributes"] = {**group_meta.get("attributes", {}), DIGEST: digest}
    text = json.dumps(group_meta, indent=2)
    atomic_write(folder / MANIFEST, lambda tmp: tmp.write_bytes(data))
    atomic_write(folder / "zarr.json", lambda tmp: tmp.write_text(text))
    return digest


def check_trusted_architecture(path: Path, attrs: Mapping[str, Any]) -> None:
    """StoreError unless the ``architecture`` attribute (if any) is a model spec naming a
    shipped model or a trusted import path; nothing is imported here."""
    spec = attrs.get("architecture")
    if spec is None:
        return
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise StoreError(
            f"{path}: attribute 'architecture' is {str(spec)[:100]!r}, expected a model spec "
            "such as {'name': 'optunet'}"
        )
    if trust.is_import_path(spec["name"]):
        try:
            trust.require("model", spec["name"], where=f"{path}: attribute 'architecture'")
        except trust.UntrustedImport as exc:
            raise StoreError(str(exc)) from None


def chunk_error(layout: ArrayLayout, index: tuple[int, ...], problem: str) -> StoreError:
    return StoreError(
        f"{layout.store}: cannot read {layout.label}: {layout.describe(index)} {problem}; {REMEDY}"
    )


def read_error(layout: ArrayLayout, exc: BaseException) -> StoreError:
    """The StoreError for a failed read of ``layout``'s array: names the damaged chunk when
    one is found on disk, else repeats Zarr's reason."""
    damaged = layout.first_damaged()
    if damaged is not None:
        return chunk_error(layout, *damaged)
    return StoreError(f"{layout.store}: cannot read {layout.label} (corrupted chunk?): {exc}")


def read_checked(
    array: zarr.Array, layout: ArrayLayout, selection: Any, oindex: bool = False
) -> np.ndarray:
    """``array[selection]`` (orthogonal indexing with ``oindex``); a selection out of range or
    a damaged chunk is a StoreError naming the store and the array (and the chunk)."""
    try:
        with chunk_checksums.checks_in_background():
            values = array.oindex[selection] if oindex else array[selection]
        return np.asarray(values)
    except IndexError as exc:
        raise StoreError(f"{layout.store}: {layout.label}: rows {selection!r}: {exc}") from exc
    except Exception as exc:
        raise read_error(layout, exc) from exc


def iter_chunks(
    array: zarr.Array, layout: ArrayLayout, recorded: Sequence[int] | None = None
) -> Iterator[tuple[tuple[int, ...], np.ndarray]]:
    """(index, values) of every chunk of ``array`` in turn, checksums verified and, given
    ``recorded`` (the manifest's checksums, chunk by chunk), compared with what the store
    was written with; StoreError naming the chunk that cannot be read, decoded or matched."""
    for position, index in enumerate(layout.indices()):
        try:
            values = np.asarray(array[layout.slices(index)])
        except Exception as exc:
            problem = layout.chunk_problem(index) or f"cannot be decoded ({exc})"
            raise chunk_error(layout, index, problem) from exc
        if recorded is not None:
            stored = layout.stored_checksum(index)
            if position >= len(recorded) or stored != recorded[position]:
                expected = f"{recorded[position]:#010x}" if position < len(recorded) else "none"
                raise chunk_error(
                    layout,
                    index,
                    f"is intact but not the chunk this store was written with (its crc32c is "
                    f"{stored or 0:#010x}, the manifest records {expected}): it was replaced "
                    "or rewritten",
                )
        yield index, values


def unverified_notes(
    layouts: Sequence[ArrayLayout], what: str = "store", checksummed: bool = False
) -> list[str]:
    """What `validate` cannot vouch for in a store without a digest (opened with
    `allow_unverified`), written with or before chunk checksums."""
    notes = [
        "no digest of its metadata (an older store format): a change to its attributes or to "
        "an array's metadata cannot be detected; `symbnn store upgrade` records one"
    ]
    if checksummed:
        return notes
    notes += [
        f"written without chunk checksums (by a symbnn older than crc32c chunks): every chunk "
        f"was read, but a changed value cannot be detected; rerun the step that wrote this "
        f"{what} to get one that can be fully verified"
    ]
    absent = [(layout, index) for layout in layouts for index in layout.missing()]
    if absent:
        layout, index = absent[0]
        notes.append(
            f"{len(absent)} chunk(s) absent and read as zeros (such {what}s omit all-zero "
            f"chunks, so a deleted one cannot be told apart), e.g. {layout.label} "
            f"{layout.describe(index)}"
        )
    return notes


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
        with writing(path):
            shutil.rmtree(path)
    with writing(path):
        os.replace(tmp, path)


@contextlib.contextmanager
def writing(path: str | os.PathLike) -> Iterator[None]:
    """Turn an OSError raised while writing the store ``path`` (a full disk, a read-only
    folder) into a StoreError naming ``path``, not the hidden folder it is built in."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise StoreError(f"{path}: cannot write the store: {reason}") from exc


@contextlib.contextmanager
def staged_folder(path: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """A temporary folder to build the store ``path`` in: installed at ``path`` when the
    block exits cleanly, removed when it raises, so no reader ever sees half a store."""
    path = Path(path)
    with writing(path):
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


class Store:
    """Read-only view of a store. Arrays are read lazily; nothing loads the whole store.

    Opening checks the format (a store without a digest is refused unless
    ``allow_unverified``), that an architecture named by import path is trusted, the metadata
    (the recorded names, every array's shape against ``n_samples``), that every chunk file
    exists, and the metadata against the manifest's copy; reads verify the chunks' checksums.
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
        try:
            self._group = zarr.open_group(self.path, mode="r", zarr_format=3)
        except Exception as exc:  # zarr raises several types for unreadable metadata
            raise StoreError(f"{self.path}: cannot open as a Zarr v3 group: {exc}") from exc
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
                    f"{self.path}: array {key} is missing or unreadable: {exc}"
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
        ``check_values``, every chunk is read (its checksum verified, and compared with the
        manifest's) and float weights are checked for NaN/inf. Returns what could not be
        verified: empty for a store with a digest; for an older store opened with
        ``allow_unverified``, notes saying so (and naming absent chunks)."""
        self.check_architecture()
        layouts = list(self._layouts.values())
        if check_values:
            for layout in layouts:
                section, name = layout.label.split("/", 1)
                recorded = None if self._recorded is None else self._recorded[layout.label]
                for index, block in iter_chunks(self._array(section, name), layout, recorded):
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
