"""Building a store atomically: a hidden sibling folder, installed in place when complete, the
manifest and digest sealing it, and write errors that name the store."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from symbnn.atomic import atomic_write
from symbnn.store.checks import chunk_error
from symbnn.store.digest import DIGEST, MANIFEST, digest_of, manifest_bytes
from symbnn.store.format import StoreError
from symbnn.store.layout import read_group_meta, read_layout


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
