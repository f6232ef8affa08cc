"""Stacked linear layers (K, B, I) -> (K, B, O), forward and backward by hand, as bmm's whose
operands all start on 64-byte boundaries (`symbnn.train.workspace`): MKL's gemm rounds some
small products differently when a matrix starts elsewhere, which would make a model's result
depend on its position in the stack. (Measured on one CPU thread, K = 16 to 256: the bmm beat
a broadcast product and sum at every size tried, from 2 x 2 layers on batches of 10 up.)
"""

from __future__ import annotations

import torch

from symbnn.train.workspace import ALIGN_BYTES, Workspace


def is_aligned(t: torch.Tensor) -> bool:
    """Whether every block t[k] is contiguous and starts on a 64-byte boundary."""
    size = t.element_size()
    return (
        t.data_ptr() % ALIGN_BYTES == 0
        and (t.stride(0) * size) % ALIGN_BYTES == 0
        and t[0].is_contiguous()
    )


def aligned(t: torch.Tensor, ws: Workspace, name: str) -> torch.Tensor:
    """`t` itself if `is_aligned`, else a copy in `ws` under `name`."""
    if is_aligned(t):
        return t
    return ws.get(name, t.shape[:1], t.shape[1:], t.dtype).copy_(t)


def forward(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, ws: Workspace, name: str
) -> torch.Tensor:
    """x (K, B, I), weight (K, O, I), bias (K, O) or None -> (K, B, O), held in `ws` under
    `name` until its next use."""
    k, b, o = x.shape[0], x.shape[1], weight.shape[1]
    out = ws.get(name, (k,), (b, o), x.dtype)
    weight = aligned(weight, ws, name + ".w")
    torch.bmm(aligned(x, ws, name + ".x"), weight.transpose(1, 2), out=out)
    if bias is not None:
        out.add_(bias.unsqueeze(1))
    return out


def backward(
    d_out: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    grad_weight: torch.Tensor,
    grad_bias: torch.Tensor | None,
    ws: Workspace,
    name: str,
    input_grad: bool = True,
) -> torch.Tensor | None:
    """Gradients of `forward`: the weight's (and bias's) into `grad_weight` (`grad_bias`);
    returns the input's (K, B, I), held in `ws`, unless `input_grad` is False."""
    if grad_bias is not None:
        torch.sum(d_out, 1, out=grad_bias)
    d_out = aligned(d_out, ws, name + ".d")
    if is_aligned(grad_weight):
        target = grad_weight
    else:
        target = ws.get(name + ".dw", grad_weight.shape[:1], grad_weight.shape[1:], x.dtype)
    torch.bmm(d_out.transpose(1, 2), aligned(x, ws, name + ".x"), out=target)
    if target is not grad_weight:
        grad_weight.copy_(target)
    if not input_grad:
        return None
    d_x = ws.get(name + ".dx", x.shape[:1], x.shape[1:], x.dtype)
    return torch.bmm(d_out, aligned(weight, ws, name + ".w"), out=d_x)
