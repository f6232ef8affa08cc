"""Per-network training losses of K stacked networks, each on its own batch."""

from __future__ import annotations

import torch
from torch.nn import functional as F

LOSSES = ("cross_entropy", "bce", "mse")


def per_network_loss(outputs: torch.Tensor, targets: torch.Tensor, loss: str) -> torch.Tensor:
    """(K,) mean loss of each network. ``outputs`` is (K, B, C); ``targets`` (K, B) or (B,):
    class indices for "cross_entropy", values in {0, 1} for "bce" and reals for "mse" (the
    last two on a single output, C = 1)."""
    k = outputs.shape[0]
    targets = targets.expand(outputs.shape[:2])
    if loss == "cross_entropy":
        flat = F.cross_entropy(outputs.flatten(0, 1), targets.flatten(), reduction="none")
        return flat.view(k, -1).mean(1)
    single = outputs[..., 0]
    targets = targets.to(single.dtype)
    if loss == "bce":
        return F.binary_cross_entropy_with_logits(single, targets, reduction="none").mean(1)
    if loss == "mse":
        return (single - targets).square().mean(1)
    raise ValueError(f"unknown loss {loss!r} (known: {', '.join(LOSSES)})")


def loss_and_grad(
    outputs: torch.Tensor, targets: torch.Tensor, loss: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """`per_network_loss` and its gradient with respect to `outputs` (K, B, C), by hand (the
    batched trainer's backward passes need no autograd graph): (K,) losses, (K, B, C)."""
    b = outputs.shape[1]
    targets = targets.expand(outputs.shape[:2])
    if loss == "cross_entropy":
        # log-softmax from elementwise ops and reductions over the whole stack: torch's fused
        # kernel works row by row and took 4 times longer on rows of 10 classes
        shifted = outputs - outputs.amax(-1, keepdim=True)
        exp = shifted.exp()
        total = exp.sum(-1, keepdim=True)
        picked = shifted.gather(-1, targets.unsqueeze(-1)) - total.log()  # log p(target)
        grad = exp.div_(total)  # softmax - one-hot(target), over the batch size
        grad.scatter_add_(-1, targets.unsqueeze(-1), torch.full_like(picked, -1.0))
        return -picked.squeeze(-1).mean(1), grad.div_(b)
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r} (known: {', '.join(LOSSES)})")
    single = outputs[..., 0]
    targets = targets.to(single.dtype)
    if loss == "bce":
        losses = F.binary_cross_entropy_with_logits(single, targets, reduction="none").mean(1)
        grad = torch.sigmoid(single).sub_(targets)
    else:  # mse
        residual = single - targets
        losses = residual.square().mean(1)
        grad = residual.mul_(2.0)
    return losses, grad.div_(b).unsqueeze(-1)
