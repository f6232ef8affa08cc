"""Re-estimating BatchNorm running statistics from data (SWAG samples, interpolated networks)."""

from __future__ import annotations

import torch
from torch import nn

from symbnn.data.core import ImageData


def batchnorm_layers(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


@torch.no_grad()
def refresh_batchnorm(model: nn.Module, batches, size_weighted: bool = True) -> nn.Module:
    """Recompute every BatchNorm layer's running statistics from `batches` (an iterable of
    input tensors): reset them, then forward each batch in train mode with momentum
    b / (n + b) (b: batch size, n: inputs seen), so the running mean and variance are the
    size-weighted averages of the batch statistics; with ``size_weighted=False``, torch's
    cumulative average (momentum None: every batch weighs alike, the same when all batches
    have one size). Momenta and the train/eval flag are restored afterwards. A model without
    BatchNorm is left untouched."""
    layers = batchnorm_layers(model)
    if not layers:
        return model
    was_training = model.training
    momenta = [layer.momentum for layer in layers]
    for layer in layers:
        layer.reset_running_stats()
        layer.momentum = None
    model.train()
    seen = 0
    for x in batches:
        b = x.shape[0]
        if size_weighted:
            for layer in layers:
                layer.momentum = b / (seen + b)
        model(x)
        seen += b
    for layer, momentum in zip(layers, momenta):
        layer.momentum = momentum
    model.train(was_training)
    return model


def training_inputs(train: ImageData, batch_size: int, device: torch.device | str):
    """The training inputs, normalised, in order, in batches (no augmentation)."""
    for start in range(0, len(train), batch_size):
        yield train.normalize(train.images[start : start + batch_size].to(device))
