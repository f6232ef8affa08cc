"""Writing bundles in the released format: a tgz of one float16 safetensors file per network,
all inside a folder named like the bundle (``<setting>-<first>-<last>/``). The importer's
tests and benchmarks build their bundles with it; it also packs networks for sharing."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from symbnn.atomic import atomic_write
from symbnn.checkpoints.safetensors_io import serialize


def as_released(state: Mapping[str, object]) -> dict[str, np.ndarray]:
    """A state_dict (torch or numpy) as the release stores it: floats in float16."""
    out = {}
    for name, value in state.items():
        array = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
        out[name] = array.astype(np.float16) if array.dtype.kind == "f" else array
    return out


def write_bundle(
    path: str | Path,
    networks: Iterable[tuple[str, Mapping[str, np.ndarray]]],
    folder: str | None = None,
    compresslevel: int = 6,
) -> Path:
    """Write the tgz ``path`` holding ``<folder>/<name>.safetensors`` for each (name, tensors)
    of ``networks`` (tensors written as given: pass them through `as_released` for float16).
    ``folder`` defaults to the bundle's name without its suffix. Written atomically."""
    path = Path(path)
    folder = folder or path.name.removesuffix(".gz").removesuffix(".tar").removesuffix(".tgz")

    def write(tmp: Path) -> None:
        with tarfile.open(tmp, "w:gz", compresslevel=compresslevel) as tar:
            for name, tensors in networks:
                data = serialize(dict(tensors))
                info = tarfile.TarInfo(f"{folder}/{name}.safetensors")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))

    atomic_write(path, write)
    return path
