"""relu(max over a window axis), with `F.max_pool2d`'s choice among equal maxima (the first
in window order) and a cheaper CPU implementation than `Tensor.max(dim)`.

On a CPU, `max(dim)` with indices over a short middle axis runs an order of magnitude slower
than elementwise `torch.maximum` over the slices; the first-maximum index is recovered with
elementwise ops too: sign(m - z_j) is 1 below the maximum and 0 at it, so the running product
of those signs, summed over j, counts the positions before the first maximum. The ops work
in place: a fresh large temporary per op made this several times slower on a CPU.
"""

from __future__ import annotations

import torch


class _PoolReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z: torch.Tensor, dim: int) -> torch.Tensor:
        slices = z.unbind(dim)
        m = slices[0].clone()
        for s in slices[1:]:
            torch.maximum(m, s, out=m)
        first = torch.zeros_like(m)
        running = None
        for s in slices[:-1]:  # the last position is first exactly when all before it are below
            below = torch.sub(m, s).sign_()  # 1 where s < m, 0 where s == m
            running = below if running is None else running.mul_(below)
            first.add_(running)
        out = m.clamp_min_(0)  # relu(max) == max(relu): the pool and the ReLU commute
        ctx.dim, ctx.shape = dim, z.shape
        ctx.save_for_backward(first.to(torch.int64), out)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        first, out = ctx.saved_tensors
        grad = grad * (out > 0)
        grad_z = grad.new_zeros(ctx.shape)
        grad_z.scatter_(ctx.dim, first.unsqueeze(ctx.dim), grad.unsqueeze(ctx.dim))
        return grad_z, None


def pool_relu(z: torch.Tensor, dim: int) -> torch.Tensor:
    """relu(z.max(dim)); the gradient goes to the first maximum along `dim`, as in max-pooling."""
    return _PoolReLU.apply(z, dim % z.ndim)
