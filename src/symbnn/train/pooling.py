"""Max-pooling over an axis of window positions, with `F.max_pool2d`'s choice among equal
maxima (the first in window order) for the gradient, by hand (no autograd).

Layout (K, P, X): P positions of each pooling window along the middle axis, everything else
(channels, samples, windows) along the contiguous last axis, so each op is one vectorised pass
over long rows. The first maximum is found without `argmax` (a scalar loop on a CPU, two
orders of magnitude slower here): a float 1 marks every maximum, weights P, P-1, ..., 1 turn
position p into P - p, and a second max over the axis gives P - (first maximum). Equal maxima
are common: a conv1 window over blank background gives the same value at every position.
"""

from __future__ import annotations

import torch


def descending(positions: int, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """(1, P, 1): P, P - 1, ..., 1."""
    return torch.arange(positions, 0, -1, dtype=dtype, device=device).view(1, positions, 1)


def max_pool(
    z: torch.Tensor, weights: torch.Tensor, out_max: torch.Tensor, out_rank: torch.Tensor
) -> None:
    """Maxima of `z` (K, P, X) over axis 1 into `out_max` (K, 1, X), and P - (position of the
    first maximum) into `out_rank` (K, 1, X) for `max_pool_backward`. `weights` is
    `descending(P, ...)`. Overwrites `z`."""
    torch.amax(z, 1, keepdim=True, out=out_max)
    torch.eq(z, out_max, out=z)
    z.mul_(weights)
    torch.amax(z, 1, keepdim=True, out=out_rank)


def max_pool_backward(
    grad: torch.Tensor, rank: torch.Tensor, weights: torch.Tensor, out: torch.Tensor
) -> None:
    """Gradient with respect to z (K, P, X), into `out`: `grad` (K, 1, X) at each window's
    first maximum, zero elsewhere. `weights` is `descending(P, ...)`: position p is the first
    maximum where its weight equals `rank`. (A 0/1 mask times the gradient: two passes, less
    than half the time of zeroing and a scatter; the zeros may carry the gradient's sign.)"""
    torch.eq(weights, rank, out=out)
    out.mul_(grad)
