"""safetensors files as bytes: the released networks' file format (a JSON header naming each
tensor's dtype, shape and byte range, then the raw little-endian data)."""

from __future__ import annotations

import numpy as np

from symbnn.checkpoints.releases import CheckpointError


def parse(data: bytes, where: str) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file held in ``data``; CheckpointError naming ``where``
    when the bytes are not a valid file (truncated, damaged header, bad offsets)."""
    from safetensors.numpy import load

    try:
        return load(data)
    except Exception as exc:  # safetensors raises its own SafetensorError, or ValueError
        raise CheckpointError(f"{where}: not a readable safetensors file: {exc}") from exc


def serialize(tensors: dict[str, np.ndarray]) -> bytes:
    from safetensors.numpy import save

    # np.asarray(order="C"), not np.ascontiguousarray, which turns a 0-d buffer into 1-d
    return save({name: np.asarray(value, order="C") for name, value in tensors.items()})
