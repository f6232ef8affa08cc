"""Nested results of tensors (a method's fits) in a file that reading cannot turn into code.

`save_tree` writes a tree of dicts (string keys), lists and tuples (read back as lists), ints,
floats, strings, bools, None and torch tensors as one safetensors file: the tensors as its
tensors, the structure as JSON in its metadata, each tensor standing there as
``{"$tensor": "<name in the file>"}``. `load_tree` reads it back; no pickle, no object is
built from the file but numbers, strings, containers and tensors. A file that is not such a
tree is a `TreeFileError` naming it.

The metadata is one key, ``symbnn-tree``, whose value is the structure's JSON: safetensors
keeps metadata in a hash map whose order changes from one process to the next, so a file
with two keys would differ in its bytes between runs (and a resumed run from an
uninterrupted one). Files written before, with the keys ``format`` and ``tree``, still read.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where tensors are handled: `outline` reads without it
    import torch

from symbnn.atomic import atomic_write

FORMAT = "symbnn-tree"  # the metadata key holding the tree (before: the value of "format")
TENSOR = "$tensor"
FLOAT = "$float"  # a NaN or an infinity, spelled as Python does


class TreeFileError(ValueError):
    """A tree file that cannot be written or read; the message names the file."""


def _encode(value: Any, tensors: dict[str, torch.Tensor], where: str) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        name = f"t{len(tensors)}"
        tensors[name] = value.detach().to("cpu").contiguous()
        return {TENSOR: name}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):  # NumPy's integers too
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else {FLOAT: repr(value)}  # JSON has no NaN, inf
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"{where}: dict keys must be strings")
        if TENSOR in value or FLOAT in value:
            raise TypeError(f"{where}: the keys {TENSOR!r} and {FLOAT!r} are reserved")
        return {k: _encode(v, tensors, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v, tensors, f"{where}[{i}]") for i, v in enumerate(value)]
    raise TypeError(f"{where}: cannot store a {type(value).__name__}")


def _unshared(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """safetensors refuses tensors sharing memory: a copy of each one seen before."""
    seen: set[int] = set()
    out = {}
    for name, tensor in tensors.items():
        pointer = tensor.untyped_storage().data_ptr() if tensor.numel() else -1
        out[name] = tensor.clone() if pointer in seen else tensor
        if tensor.numel():
            seen.add(pointer)
    return out


def save_tree(tree: Any, path: str | os.PathLike) -> None:
    """Write ``tree`` to ``path`` atomically (a killed job leaves no half file)."""
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    try:
        structure = _encode(tree, tensors, "tree")
    except TypeError as exc:
        raise TreeFileError(f"{path}: {exc}") from None
    # one key: a header of the same bytes in every process (see the module docstring)
    metadata = {FORMAT: json.dumps(structure)}
    tensors = _unshared(tensors)
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))


def _decode(value: Any, tensors: dict[str, torch.Tensor], used: set[str]) -> Any:
    if isinstance(value, dict):
        if set(value) == {TENSOR}:
            name = value[TENSOR]
            if name not in tensors or name in used:
                raise ValueError(f"the tree names tensor {name!r}, which the file lacks")
            used.add(name)
            return tensors[name]
        if set(value) == {FLOAT}:
            return float(value[FLOAT])
        return {k: _decode(v, tensors, used) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, tensors, used) for v in value]
    return value


def _tree_text(metadata: dict[str, str]) -> str | None:
    """The tree's JSON in a file's metadata, as written now or before (two keys)."""
    if FORMAT in metadata:
        return metadata[FORMAT]
    if metadata.get("format") == FORMAT:
        return metadata.get("tree")
    return None


def load_tree(path: str | os.PathLike) -> Any:
    """The tree `save_tree` wrote to ``path`` (tensors on the CPU)."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt", device="cpu") as file:
            metadata = file.metadata() or {}
            tensors = {name: file.get_tensor(name) for name in file.keys()}  # noqa: SIM118
    except FileNotFoundError:
        raise
    except (SafetensorError, OSError, ValueError) as exc:
        raise TreeFileError(f"{path}: not a readable safetensors file ({exc})") from None
    text = _tree_text(metadata)
    if text is None:
        raise TreeFileError(f"{path}: not a {FORMAT} file (its metadata has no tree)")
    used: set[str] = set()
    try:
        tree = _decode(json.loads(text), tensors, used)
    except (KeyError, ValueError, TypeError) as exc:
        raise TreeFileError(f"{path}: malformed tree ({exc})") from None
    if used != set(tensors):
        raise TreeFileError(
            f"{path}: malformed tree (tensors {sorted(set(tensors) - used)} unused)"
        )
    return tree


def outline(path: str | os.PathLike) -> Any:
    """The tree of a file `save_tree` wrote, with each tensor left as ``{"$tensor": name}``:
    read from the safetensors header alone (no tensor data, no torch), for the workflow's
    planning. TreeFileError naming the file when it is not such a file."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(size))
        text = _tree_text(header.get("__metadata__") or {})
        if text is None:
            raise ValueError("its metadata has no tree")
        return json.loads(text)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
        raise TreeFileError(f"{path}: not a {FORMAT} file ({exc})") from None
