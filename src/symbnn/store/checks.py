"""The checks of a store: its attributes, its format and digest, the presence and checksums of
its chunks, and the reads that verify them (`symbnn.store`); each failure is a StoreError
naming the store, the array and the chunk or what changed."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from symbnn import trust
from symbnn.store import chunk_checksums
from symbnn.store.digest import (
    DIGEST,
    MANIFEST,
    changes,
    digest_of,
    group_changes,
    parse_manifest,
)
from symbnn.store.format import FORMAT_VERSION, REMEDY, StoreError
from symbnn.store.layout import ArrayLayout
from symbnn.store.pinned import ChunkNotRecorded

# Whether stores without a digest open (with a warning): `symbnn --allow-unverified`.
_unverified = {"allowed": False, "warned": set()}


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
    except ValueError as exc:  # json's errors (UnicodeDecodeError included) are ValueErrors
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
        found = changes("key", entry["metadata"], layout.meta)
        if found:
            raise StoreError(
                f"{path}: the metadata of {label} ({label}/zarr.json) was changed after the "
                f"store was written: {'; '.join(found[:3])}; {REMEDY}"
            )
        crcs = entry["crc32c"]
        if len(crcs) != math.prod(layout.grid):
            raise StoreError(f"{path}: {MANIFEST} lists no checksum per chunk of {label}")
        checksums[label] = crcs
    return checksums


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
    """``array[selection]`` (orthogonal indexing with ``oindex``); a selection out of range, a
    damaged chunk or, in an array opened by `pinned.open_group`, a chunk other than the one
    the manifest records is a StoreError naming the store, the array and the chunk."""
    try:
        with chunk_checksums.checks_in_background():
            values = array.oindex[selection] if oindex else array[selection]
        return np.asarray(values)
    except ChunkNotRecorded as exc:
        raise chunk_error(layout, exc.index, exc.problem) from None
    except IndexError as exc:
        raise StoreError(f"{layout.store}: {layout.label}: rows {selection!r}: {exc}") from exc
    except Exception as exc:
        raise read_error(layout, exc) from exc


def iter_chunks(
    array: zarr.Array, layout: ArrayLayout
) -> Iterator[tuple[tuple[int, ...], np.ndarray]]:
    """(index, values) of every chunk of ``array`` in turn, checksums verified (and held to
    the manifest's when the array was opened by `pinned.open_group`); StoreError naming the
    chunk that cannot be read, decoded or matched."""
    for index in layout.indices():
        try:
            values = np.asarray(array[layout.slices(index)])
        except ChunkNotRecorded as exc:
            raise chunk_error(layout, index, exc.problem) from None
        except Exception as exc:
            problem = layout.chunk_problem(index) or f"cannot be decoded ({exc})"
            raise chunk_error(layout, index, problem) from exc
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
