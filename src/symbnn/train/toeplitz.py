"""Convolutions as matmuls with row-Toeplitz matrices built from stacked kernels.

A k x k convolution (stride 1, no padding) maps the input rows y..y+k-1 (a "window", all
input channels, `span` columns) to output row y (all output channels, `width` columns) by a
fixed banded matrix T[(c, i, j), (o, x)] = W[o, c, i, j - x] for 0 <= j - x < k, else 0.
T is the same for every output row (the convolution is shift invariant), so a batch of
windows (rows) times T is the whole convolution as one matmul with BLAS-friendly shapes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.nn import functional as F

IndexMap = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class ToeplitzIndex:
    """Where each kernel entry goes in T. `feature_of(c, i, j)` and `column_of(o, x)` give the
    flat row and column of T for index tensors, so the caller picks both memory orders."""

    def __init__(
        self,
        out_channels: int,
        in_channels: int,
        k: int,
        span: int,
        width: int,
        feature_of: IndexMap,
        column_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    ) -> None:
        if span < width + k - 1:
            raise ValueError(
                f"a window of {span} columns cannot produce {width} outputs with a {k}-wide kernel"
            )
        self.features = in_channels * k * span
        self.columns = out_channels * width
        o, c, i, dj, x = torch.meshgrid(
            *(torch.arange(n) for n in (out_channels, in_channels, k, k, width)), indexing="ij"
        )
        kernel_entry = ((o * in_channels + c) * k + i) * k + dj  # flat index in W (out, in, k, k)
        position = feature_of(c, i, x + dj) * self.columns + column_of(o, x)
        self.kernel_size = out_channels * in_channels * k * k
        # gather[p]: the kernel entry at flat position p of T, or kernel_size (a zero) if none
        self.gather = torch.full(
            (self.features * self.columns,), self.kernel_size, dtype=torch.long
        )
        self.gather[position.flatten()] = kernel_entry.flatten()
        if (self.gather < self.kernel_size).sum() != position.numel():
            raise ValueError("feature_of / column_of map two kernel entries to one place")
        # copies[e]: the `width` positions of T that hold kernel entry e (one per output column)
        self.copies = position.reshape(self.kernel_size, width)

    def to(self, device: torch.device | str) -> ToeplitzIndex:
        self.gather, self.copies = self.gather.to(device), self.copies.to(device)
        return self

    def expand(self, kernels: torch.Tensor) -> torch.Tensor:
        """(M, kernel_size) flat kernels -> (M, features, columns) Toeplitz matrices."""
        return _Expand.apply(kernels, self.gather, self.copies).view(
            -1, self.features, self.columns
        )


class _Expand(torch.autograd.Function):
    # a gather forward and a gather-and-sum backward: exact, with no atomic adds, so
    # deterministic on every device (index_select's own backward, index_add, is not on CUDA)
    @staticmethod
    def forward(ctx, kernels, gather, copies):
        ctx.save_for_backward(copies)
        return F.pad(kernels, (0, 1)).index_select(1, gather)

    @staticmethod
    def backward(ctx, grad):
        (copies,) = ctx.saved_tensors
        return grad[:, copies].sum(-1), None, None
