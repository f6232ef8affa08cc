"""Where released networks come from: a bundle (``<setting>-<first>-<last>.tgz``), a folder of
bundles, or a bundle untarred into a folder. Networks come out one at a time, as the bytes
of their safetensors file, so a 23 GB bundle is never unpacked on disk or held in memory.

Order and numbering: bundles go by the first network their name announces; inside a tgz
the members keep the archive's order (fixed by the file), inside an untarred folder the
files go in natural order of their paths (``net_2`` before ``net_10``). A network's index
in the release is its bundle's first index plus its position in the bundle (or its position
in the whole source when a name announces none)."""

from __future__ import annotations

import dataclasses
import gzip
import re
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from symbnn.checkpoints.gzip_stream import open_gzip
from symbnn.checkpoints.releases import CheckpointError
from symbnn.prefetch import prefetched
from symbnn.settings.checkpoints import Checkpoints

NETWORK_SUFFIX = ".safetensors"
BUNDLE_SUFFIXES = (".tgz", ".tar.gz")
BUNDLE_NAME = re.compile(r"^(?P<setting>.+)-(?P<first>\d+)-(?P<last>\d+)(\.tgz|\.tar\.gz)?$")
# The tar stream is read in blocks of this size (tarfile's default, 10 KiB, costs a Python
# call per block: a third of the import time of a ResNet-18 bundle).
READ_BYTES = 2**20
# Networks of a tgz read ahead of the one being imported.
PREFETCH = 2
# Read a finished tgz to its end in blocks of this size, so gzip checks its CRC and length.
DRAIN_BYTES = 2**20


@dataclasses.dataclass(frozen=True)
class Bundle:
    path: Path
    first: int | None  # release index of its first network, from its name
    last: int | None

    @property
    def packed(self) -> bool:
        return self.path.is_file()

    @property
    def label(self) -> str:
        return self.path.name

    def outside(self, first: int, stop: int | None) -> bool:
        """Whether its name puts all its networks outside ``first <= index < stop`` (a
        bundle whose name announces no range may hold any)."""
        if self.first is None or self.last is None:
            return False
        return self.last < first or (stop is not None and self.first >= stop)

    @classmethod
    def at(cls, path: Path) -> Bundle:
        match = BUNDLE_NAME.match(path.name)
        if match is None:
            return cls(path, None, None)
        return cls(path, int(match["first"]), int(match["last"]))


@dataclasses.dataclass(frozen=True)
class Network:
    index: int  # position in the release
    source: str  # "<bundle>:<file inside it>"
    data: bytes  # the safetensors file


def is_bundle_file(path: Path) -> bool:
    return path.name.endswith(BUNDLE_SUFFIXES)


def find_bundles(source: str | Path) -> list[Bundle]:
    """The bundles of ``source`` in release order; CheckpointError when it holds none."""
    source = Path(source)
    if source.is_file():
        if not is_bundle_file(source):
            raise CheckpointError(
                f"{source}: not a bundle (expected a .tgz file, a folder of them or an "
                "untarred bundle)"
            )
        return [Bundle.at(source)]
    if not source.is_dir():
        raise CheckpointError(f"{source}: no such file or folder")
    packed = [path for path in source.iterdir() if path.is_file() and is_bundle_file(path)]
    if not packed:
        if not any(source.rglob(f"*{NETWORK_SUFFIX}")):
            raise CheckpointError(
                f"{source}: holds no bundle (*.tgz) and no network (*{NETWORK_SUFFIX})"
            )
        return [Bundle.at(source)]
    # untarred bundles beside packed ones count too, when their names say which they are
    untarred = [path for path in source.iterdir() if path.is_dir() and BUNDLE_NAME.match(path.name)]
    bundles = [Bundle.at(path) for path in packed + untarred]
    bundles.sort(key=lambda b: (b.first is None, b.first or 0, natural_key(b.label)))
    return bundles


def natural_key(text: str) -> tuple:
    """Sort key in which digit runs compare as numbers: net_2 < net_10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def iter_networks(
    bundles: list[Bundle], first: int = Checkpoints.default("first"), stop: int | None = None
) -> Iterator[Network]:
    """Networks ``first <= index < stop`` of ``bundles`` (release indices), in order. A
    bundle whose name puts it wholly outside the range is not opened; networks before
    ``first`` inside an opened bundle are counted, never read."""
    offset = 0
    for bundle in bundles:
        start = bundle.first if bundle.first is not None else offset
        if bundle.outside(first, stop):
            offset = bundle.last + 1
            continue
        if bundle.packed:  # inflating (GIL released) runs beside the caller's work
            members = prefetched(_tgz_members(bundle, start, first, stop), PREFETCH)
        else:
            members = _folder_members(bundle, start, first, stop)
        position = -1
        for position, (name, data) in enumerate(members):
            if data is not None:  # None: before `first`
                yield Network(start + position, f"{bundle.label}:{name}", data)
        if stop is not None and start + position + 1 >= stop:
            return
        offset = start + position + 1


def _folder_members(bundle: Bundle, start: int, first: int, stop: int | None):
    files = sorted(
        (p for p in bundle.path.rglob(f"*{NETWORK_SUFFIX}") if p.is_file()),
        key=lambda p: natural_key(p.relative_to(bundle.path).as_posix()),
    )
    for position, path in enumerate(files):
        index = start + position
        if stop is not None and index >= stop:
            return
        yield path.relative_to(bundle.path).as_posix(), _read_file(path) if index >= first else None


def _read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _tgz_members(bundle: Bundle, start: int, first: int, stop: int | None):
    """(name, bytes or None) of each network in the tgz, streamed; the gzip stream is read to
    its end (CRC and length checked) unless the range ends inside the bundle."""
    last = "its start"
    try:
        with (
            open_gzip(bundle.path) as stream,
            tarfile.open(fileobj=stream, mode="r|", bufsize=READ_BYTES) as tar,
        ):
            index = start
            for member in tar:
                if not (member.isfile() and member.name.endswith(NETWORK_SUFFIX)):
                    continue
                if stop is not None and index >= stop:
                    return
                last = member.name
                data = tar.extractfile(member).read() if index >= first else None
                index += 1
                yield member.name, data
            while stream.read(DRAIN_BYTES):
                pass
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
        raise CheckpointError(
            f"{bundle.path}: the bundle is truncated or corrupt (read up to {last}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
