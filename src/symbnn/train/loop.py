"""The reference trainer: one `nn.Module` and one `torch.optim.SGD` per seed, seed after seed.

It handles every model (BatchNorm included) and is what the batched trainer is checked
against: both draw initial weights, data order and augmentation from the same per-seed
generators (`symbnn.train.seeding`), in the same sequence.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn import functional as F

from symbnn.data.core import ImageData
from symbnn.train.batches import augment_crop_flip, batch_bounds, epoch_orders
from symbnn.train.recipe import Recipe
from symbnn.train.seeding import build_seeded_model, seed_generator


def train_one(model_spec: dict[str, Any], recipe: Recipe, train: ImageData, seed: int,
              device: torch.device | str = "cpu") -> tuple[torch.nn.Module, float]:
    """Train one seed; returns the module (on `device`) and its final-epoch mean loss."""
    model = build_seeded_model(model_spec, seed).to(device)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=recipe.lr, momentum=recipe.momentum,
                                nesterov=recipe.nesterov, weight_decay=recipe.weight_decay)
    order_generator = seed_generator(seed, "order")
    augment_generator = seed_generator(seed, "augment") if recipe.augment else None
    images = train.images.to(device)
    labels = train.labels.to(device)
    table = None if recipe.augment else train.normalize(images)  # normalised once
    n = len(train)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)  # no host sync per step
    for epoch in range(recipe.epochs):
        for group in optimizer.param_groups:
            group["lr"] = recipe.lr_at(epoch)
        order = epoch_orders(n, [order_generator])[0].to(device)
        loss_sum.zero_()
        for start, stop in batch_bounds(n, recipe.batch_size):
            idx = order[start:stop]
            if augment_generator is None:
                x = table[idx]
            else:
                x = train.normalize(augment_crop_flip(images[idx], augment_generator))
            loss = F.cross_entropy(model(x), labels[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_sum += loss.detach() * (stop - start)
    return model, float(loss_sum) / n
