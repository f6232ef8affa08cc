"""Convolutions as matmuls with Toeplitz matrices built from stacked kernels.

A k x k convolution (stride 1, no padding) evaluated at P positions of a window of its input
(a patch of all input channels) is one matmul with a fixed sparse matrix T whose entries are
kernel entries or zeros: the output at position p, channel o takes W[o, c, i, j] times the
window's value at (c, dy_p + i, dx_p + j), (dy_p, dx_p) being position p's offset. T is the
same for every window (the convolution is shift invariant), so a batch of windows times T is
the whole convolution as one matmul with BLAS-friendly shapes. The caller chooses the memory
order of T through `place`, and the positions (a pooling window, a row of outputs) through
`offsets`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.nn import functional as F

# place(o, p, c, y, x) -> flat index into T of output channel o at position p and window
# element (c, y, x); all arguments are index tensors of one shape
Place = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor
]


class ToeplitzIndex:
    """Where each kernel entry goes in T (`shape`, a matrix), and back."""

    def __init__(
        self,
        out_channels: int,
        in_channels: int,
        k: int,
        offsets: Sequence[tuple[int, int]],
        shape: tuple[int, int],
        place: Place,
    ) -> None:
        self.shape = tuple(shape)
        positions = len(offsets)
        o, c, i, j, p = torch.meshgrid(
            *(torch.arange(n) for n in (out_channels, in_channels, k, k, positions)),
            indexing="ij",
        )
        offset = torch.tensor(offsets, dtype=torch.long).view(positions, 2)
        flat = place(o, p, c, offset[p, 0] + i, offset[p, 1] + j)
        kernel_entry = ((o * in_channels + c) * k + i) * k + j  # flat index in W (out, in, k, k)
        self.kernel_size = out_channels * in_channels * k * k
        size = shape[0] * shape[1]
        if flat.min() < 0 or flat.max() >= size:
            raise ValueError(f"place() puts kernel entries outside a {shape} matrix")
        # gather[f]: the kernel entry at flat position f of T, or kernel_size (a zero) if none
        self.gather = torch.full((size,), self.kernel_size, dtype=torch.long)
        self.gather[flat.flatten()] = kernel_entry.flatten()
        if (self.gather < self.kernel_size).sum() != flat.numel():
            raise ValueError("place() maps two kernel entries to one place")
        # copies[e]: the positions of T that hold kernel entry e (one per output position)
        self.copies = flat.reshape(self.kernel_size, positions)

    def to(self, device: torch.device | str) -> ToeplitzIndex:
        self.gather, self.copies = self.gather.to(device), self.copies.to(device)
        return self

    def expand(self, kernels: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """(M, kernel_size) flat kernels -> T, written into `out` (M, *shape)."""
        m = kernels.shape[0]
        torch.index_select(F.pad(kernels, (0, 1)), 1, self.gather, out=out.view(m, -1))
        return out

    def kernel_grad(self, grad: torch.Tensor) -> torch.Tensor:
        """(M, *shape) gradient with respect to T -> (M, kernel_size) gradient with respect to
        the kernels: each entry sums the places that hold it (in a fixed order: exact and
        deterministic on every device, unlike an index_add)."""
        return grad.reshape(grad.shape[0], -1)[:, self.copies].sum(-1)
