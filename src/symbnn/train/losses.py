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
