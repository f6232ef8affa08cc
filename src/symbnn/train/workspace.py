"""Stacked buffers whose per-model blocks start on 64-byte boundaries, reused from step to step.

Why aligned: MKL's gemm rounds some products differently depending on where a matrix starts in
memory (seen: (3 x 64) @ (64 x 10) products at odd positions of a stack of 30-float blocks),
which would make a model's weights depend on its position in the stack. Every matrix the
batched trainer hands to a batched matmul therefore starts on a cache line: a stack pads each
model's block to a multiple of 64 bytes.

Why reused: the step's intermediates are the same few shapes every step (two batch sizes per
epoch at most), and writing into a buffer that is already mapped is cheaper on a CPU than a
fresh large tensor each time.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import torch

ALIGN_BYTES = 64


def padded_numel(numel: int, dtype: torch.dtype) -> int:
    """`numel` rounded up to a whole number of 64-byte lines of `dtype` elements."""
    per_line = max(1, ALIGN_BYTES // dtype.itemsize)
    return -(-numel // per_line) * per_line


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


class Workspace:
    """Named reusable buffers: `get(name, batch, shape)` is a (*batch, *shape) tensor whose
    blocks (one per index of `batch`) each start on a 64-byte boundary; the contents are
    whatever the last user left there."""

    def __init__(self, device: torch.device | str, dtype: torch.dtype) -> None:
        self.device = torch.device(device)
        self.dtype = dtype
        self._buffers: dict[str, torch.Tensor] = {}
        self._views: dict[tuple, torch.Tensor] = {}  # the same view for the same request
        self._constants: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def get(
        self,
        name: str,
        batch: Sequence[int],
        shape: Sequence[int],
        dtype: torch.dtype | None = None,
    ) -> torch.Tensor:
        key = (name, *batch, None, *shape, dtype)
        view = self._views.get(key)
        if view is not None:
            return view
        dtype = dtype or self.dtype
        block = padded_numel(math.prod(shape), dtype)
        need = math.prod(batch) * block
        buffer = self._buffers.get(name)
        if buffer is None or buffer.numel() < need or buffer.dtype != dtype:
            buffer = torch.empty(need, dtype=dtype, device=self.device)
            self._buffers[name] = buffer
            self._views = {k: v for k, v in self._views.items() if k[0] != name}
        batch_strides = tuple(s * block for s in contiguous_strides(batch))
        view = buffer.as_strided((*batch, *shape), (*batch_strides, *contiguous_strides(shape)))
        self._views[key] = view
        return view

    def constant(self, name: str, batch: Sequence[int], value: torch.Tensor) -> torch.Tensor:
        """`value` repeated over `batch`, aligned like `get`'s buffers; filled once per
        (value, batch size)."""
        cached = self._constants.get(name)
        if cached is not None and cached[0] is value and cached[1].shape[: len(batch)] == batch:
            return cached[1]
        out = self.get(name, batch, value.shape, value.dtype)
        out.copy_(value.expand(*batch, *value.shape))
        self._constants[name] = (value, out)
        return out


class PerThread:
    """A `Workspace` for each thread that asks: chunks of models may run on several threads."""

    def __init__(self, device: torch.device | str, dtype: torch.dtype) -> None:
        self.device, self.dtype = device, dtype
        self._local = threading.local()

    def __call__(self) -> Workspace:
        if not hasattr(self._local, "workspace"):
            self._local.workspace = Workspace(self.device, self.dtype)
        return self._local.workspace


def gather_rows(table: torch.Tensor, idx: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out (K, B, ...) = table[idx] for a table (N, ...) and indices (K, B): one index_select
    straight into `out` when both are contiguous."""
    if table.is_contiguous() and out.is_contiguous():
        rows = out.view(idx.numel(), -1)
        torch.index_select(table.view(table.shape[0], -1), 0, idx.reshape(-1), out=rows)
        return out
    return out.copy_(table[idx].view(out.shape))
