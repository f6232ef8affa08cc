"""`symbnn store upgrade`: stores written before the digest (format_version 1) made current,
and the workflow's start-up check that finds them (docs/stores.md).

A store with chunk checksums is read whole (every chunk against its crc32c, weights checked
finite), then its manifest and digest are written beside it and its format_version set to 2,
each file replaced atomically; the chunks are not rewritten. A store written before chunk
checksums is copied chunk by chunk, with the same layout, into a staged store with checksums,
a manifest and a digest, and installed in its place: its values could not be verified (such a
store has nothing to verify them against), and the store records so (attribute ``upgraded``).
A store that already has a manifest is never resealed over a change: its metadata must still
be what the manifest recorded (an upgrade interrupted half-way passes; an edit does not).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import zarr

import symbnn
from symbnn.atomic import atomic_write
from symbnn.store import (
    ARRAY_CONFIG,
    CHECKSUM,
    CHECKSUM_CODECS,
    FORMAT,
    FORMAT_VERSION,
    PREDICTIONS,
    REMEDY,
    UPGRADED,
    ArrayLayout,
    StoreError,
    chunk_error,
    open_store,
    read_group_meta,
    read_layout,
    seal,
    staged_folder,
)
from symbnn.store.digest import DIGEST, MANIFEST, changes, parse_manifest
from symbnn.store.predictions import ARRAYS, open_predictions

TIMESTAMP = ".snakemake_timestamp"  # Snakemake's record of a folder output's age: kept
COMMAND = "make upgrade-stores"


def is_current(attrs: dict[str, Any]) -> bool:
    return attrs.get("format_version") == FORMAT_VERSION and isinstance(attrs.get(DIGEST), str)


def needs_upgrade(path: Path) -> bool:
    """Whether the folder ``path`` is a symbnn store (weights or predictions) without a digest
    (its top-level zarr.json read, nothing else)."""
    try:
        meta = json.loads((path / "zarr.json").read_text())
    except (OSError, ValueError):
        return False
    attrs = meta.get("attributes") if isinstance(meta, dict) else None
    if not isinstance(attrs, dict):  # not a store: its readers name what is wrong
        return False
    return attrs.get("format") in (FORMAT, PREDICTIONS) and not is_current(attrs)


def find_stores(folder: Path) -> Iterator[Path]:
    """Every ``*.zarr`` folder under ``folder``, not descending into stores or hidden folders
    (stores being built are hidden)."""
    for root, dirs, _ in os.walk(folder):
        for name in list(dirs):
            if name.startswith(".") or name.endswith(".zarr"):
                dirs.remove(name)
                if not name.startswith("."):
                    yield Path(root) / name


def stores_to_upgrade(folders: Iterable[str | os.PathLike]) -> list[Path]:
    return sorted(
        store
        for folder in folders
        if Path(folder).is_dir()
        for store in find_stores(Path(folder))
        if needs_upgrade(store)
    )


def refuse_old_stores(folders: Iterable[str | os.PathLike]) -> None:
    """StoreError listing the stores under ``folders`` written before the digest and saying
    how to upgrade them: the workflow's start-up check (Snakemake would not rerun them)."""
    old = stores_to_upgrade(folders)
    if not old:
        return
    shown = "\n".join(f"  {path}" for path in old[:10])
    more = f"\n  ... and {len(old) - 10} more" if len(old) > 10 else ""
    raise StoreError(
        f"{len(old)} store(s) in the results were written in an older store format (no "
        f"digest), which symbnn no longer reads unverified:\n{shown}{more}\nUpgrade them once "
        f"(every chunk is verified, then a digest is recorded): {COMMAND}, or "
        "symbnn store upgrade PATH..."
    )


def refuse_old_stores_at_start(workflow: Any, folders: Iterable[str | os.PathLike]) -> None:
    """`refuse_old_stores` in Snakemake's main process (not in the jobs it starts), ending it
    with the message: the Snakefile calls it at every start, dry runs included (a walk of the
    result folders that reads only each store's top-level zarr.json)."""
    if workflow.is_main_process:
        try:
            refuse_old_stores(folders)
        except StoreError as exc:  # the message alone: Snakemake would add its traceback
            sys.exit(f"symbnn: {exc}")


def _labels(path: Path, attrs: dict[str, Any]) -> list[str]:
    if attrs.get("format") == PREDICTIONS:
        return [name for name in ARRAYS if (path / name / "zarr.json").exists()]
    labels = []
    for section in ("state", "info"):
        names = attrs.get(f"{section}_names", [])
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise StoreError(
                f"{path}: attribute '{section}_names' is {str(names)[:80]!r}, expected a list "
                "of array names (the store is damaged or was not written by symbnn)"
            )
        labels += [f"{section}/{name}" for name in names]
    return labels


def _unchanged_manifest(path: Path, group_meta: dict[str, Any]) -> dict[str, Any]:
    """For a store that has a manifest but no valid digest: StoreError unless its metadata is
    still what the manifest recorded (format_version and digest aside); the manifest."""
    try:
        manifest = parse_manifest((path / MANIFEST).read_bytes())
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: unreadable {MANIFEST} ({exc}); {REMEDY}") from None
    ignored = ("format_version", DIGEST)

    def attributes(meta):
        return {k: v for k, v in meta.get("attributes", {}).items() if k not in ignored}

    found = changes("attribute", attributes(manifest["group"]), attributes(group_meta))
    for label, entry in manifest["arrays"].items():
        try:
            meta = read_layout(path, label).meta
        except StoreError as exc:
            found.append(str(exc))
            continue
        found += [f"{label}: {c}" for c in changes("key", entry.get("metadata", {}), meta)]
    if found:
        raise StoreError(
            f"{path}: written with a manifest, and changed since: {'; '.join(found[:3])}; "
            f"not upgraded: {REMEDY}"
        )
    return manifest


def _check_recorded(layouts: list[ArrayLayout], manifest: dict[str, Any]) -> None:
    """StoreError naming the first chunk that is damaged or not the one ``manifest`` records."""
    for layout in layouts:
        expected = manifest["arrays"].get(layout.label, {}).get("crc32c", [])
        for position, index in enumerate(layout.indices()):
            problem = layout.chunk_problem(index)
            if problem is not None:
                raise chunk_error(layout, index, problem)
            stored = layout.stored_checksum(index)
            if position >= len(expected) or stored != expected[position]:
                raise chunk_error(layout, index, f"is not the chunk {MANIFEST} records")


def _copy_with_checksums(path: Path, labels: list[str], attrs: dict[str, Any]) -> None:
    """Rewrite the store at ``path`` (no chunk checksums) with checksums, chunk by chunk in
    its own layout, into a staged copy installed in its place, sealed."""
    source = zarr.open_group(path, mode="r", zarr_format=3)
    with staged_folder(path, overwrite=True) as tmp:
        group = zarr.open_group(tmp, mode="w", zarr_format=3)
        for label in labels:
            layout = read_layout(path, label)
            old = source[label]
            new = group.create_array(
                label,
                shape=old.shape,
                dtype=old.dtype,
                chunks=layout.chunks,
                fill_value=old.fill_value,
                compressors=CHECKSUM_CODECS,
                config=ARRAY_CONFIG,
                attributes=layout.meta.get("attributes") or None,
            )
            for index in layout.indices():
                where = layout.slices(index)
                new[where] = old[where]
        group.attrs.update({**attrs, "checksum": CHECKSUM})
        if (path / TIMESTAMP).exists():
            shutil.copy2(path / TIMESTAMP, tmp / TIMESTAMP)
        seal(tmp, labels, path)


def _seal_in_place(path: Path, group_meta: dict[str, Any], labels: list[str]) -> None:
    """Write ``group_meta`` as the store's zarr.json, then its manifest and digest (each file
    replaced atomically: an interruption leaves a store that upgrade completes)."""
    text = json.dumps(group_meta, indent=2)
    atomic_write(path / "zarr.json", lambda tmp: tmp.write_text(text))
    seal(path, labels)


def _reseal(path: Path, group_meta: dict[str, Any], labels: list[str]) -> list[str]:
    """A store with a manifest whose digest or format_version is missing (an interrupted
    upgrade, or those two edited): sealed again as the manifest recorded it, once its
    metadata and every chunk are found to be what the manifest records."""
    manifest = _unchanged_manifest(path, group_meta)
    layouts = [read_layout(path, label) for label in labels]
    _check_recorded(layouts, manifest)
    _seal_in_place(path, {**group_meta, "attributes": manifest["group"]["attributes"]}, labels)
    chunks = sum(1 for layout in layouts for _ in layout.indices())
    return [
        f"{path}: sealed again: metadata as its {MANIFEST} records, {chunks} chunk(s) matching "
        f"their checksums and the manifest; digest recorded (format_version {FORMAT_VERSION})"
    ]


def upgrade(path: str | os.PathLike) -> list[str]:
    """Upgrade the store at ``path`` to the current format; lines saying what was verified
    and what could not be. StoreError when it cannot be upgraded (damaged, or changed
    after a manifest was written)."""
    path = Path(path)
    group_meta = read_group_meta(path)
    attrs = dict(group_meta.get("attributes", {}))
    kind = attrs.get("format")
    if kind not in (FORMAT, PREDICTIONS):
        raise StoreError(f"{path}: not a symbnn store (attribute 'format' is {kind!r})")
    opener = open_predictions if kind == PREDICTIONS else open_store
    if is_current(attrs):
        opener(path)
        return [f"{path}: already format_version {FORMAT_VERSION}, matching its digest"]
    labels = _labels(path, attrs)
    if (path / MANIFEST).exists():
        return _reseal(path, group_meta, labels)
    store = opener(path, allow_unverified=True)
    notes = store.validate()  # every chunk read: checksums verified where there are any
    layouts = [read_layout(path, label) for label in labels]
    chunks = sum(1 for layout in layouts for _ in layout.indices())
    verified = all(layout.checksum for layout in layouts)
    attrs[UPGRADED] = {
        "from_format_version": attrs.get("format_version"),
        "symbnn_version": symbnn.__version__,
        "values_verified": verified,
    }
    attrs["format_version"] = FORMAT_VERSION
    attrs.pop(DIGEST, None)
    if verified:
        _seal_in_place(path, {**group_meta, "attributes": attrs}, labels)
        return [
            f"{path}: upgraded: {chunks} chunk(s) read, each matching its crc32c checksum; "
            f"digest recorded (format_version {FORMAT_VERSION})"
        ]
    _copy_with_checksums(path, labels, attrs)
    lines = [
        f"{path}: upgraded, NOT verified: written without chunk checksums, so its values "
        f"could not be verified ({chunks} chunk(s) read, nothing to check them against); "
        f"rewritten with checksums and a digest (format_version {FORMAT_VERSION}), so later "
        "changes are detected"
    ]
    return lines + [f"{path}: note: {note}" for note in notes if "absent" in note]
