"""Test accuracy of trained models, always through the `nn.Module` itself (eval mode), so the
number describes the stored weights whatever trainer produced them."""

from __future__ import annotations

import torch
from torch import nn

from symbnn.data.core import ImageData
from symbnn.settings import Methods


@torch.no_grad()
def accuracy(
    model: nn.Module,
    data: ImageData,
    device: torch.device | str = "cpu",
    batch_size: int = Methods.default("predict_batch"),
) -> float:
    was_training = model.training
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    for start in range(0, len(data), batch_size):
        images = data.images[start : start + batch_size].to(device)
        labels = data.labels[start : start + batch_size].to(device)
        correct += (model(data.normalize(images)).argmax(1) == labels).sum()
    model.train(was_training)
    return int(correct) / len(data)


def unstack(stacked: dict[str, torch.Tensor], k: int) -> dict[str, torch.Tensor]:
    """Model k's state dict from a stacked one (name -> (K, *shape))."""
    return {name: tensor[k] for name, tensor in stacked.items()}
