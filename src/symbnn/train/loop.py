"""The reference trainer: one `nn.Module` and one `torch.optim.SGD` per seed, seed after seed.

It handles every model (BatchNorm included) and is what the batched trainer is checked
against: both draw initial weights, data order and augmentation from the same per-seed
generators (`symbnn.train.seeding`), in the same sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.nn import functional as F

from symbnn.data.core import ImageData
from symbnn.settings import Recipe
from symbnn.train.batches import augment_crop_flip, batch_bounds, epoch_orders
from symbnn.train.seeding import build_seeded_model, seed_generator


def train_one(
    model_spec: dict[str, Any],
    recipe: Recipe,
    train: ImageData,
    seed: int,
    device: torch.device | str = "cpu",
) -> tuple[torch.nn.Module, float]:
    """Train one seed; returns the module (on `device`) and its final-epoch mean loss."""
    model = build_seeded_model(model_spec, seed).to(device)
    return model, fit_module(model, recipe, train, seed, device)


LossFn = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


def cross_entropy_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(x), y)


def seed_batches(
    train: ImageData,
    batch_size: int,
    seed: int,
    epochs: int,
    device: torch.device | str = "cpu",
    augment: str = "none",
) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
    """(epoch, normalised inputs, labels) for every step of `epochs` epochs, in seed `seed`'s
    data order (and augmentation): the same stream the trainers use."""
    order_generator = seed_generator(seed, "order")
    augmenting = augment != "none"
    augment_generator = seed_generator(seed, "augment") if augmenting else None
    images = train.images.to(device)
    labels = train.labels.to(device)
    table = None if augmenting else train.normalize(images)  # normalised once
    for epoch in range(epochs):
        order = epoch_orders(len(train), [order_generator])[0].to(device)
        for start, stop in batch_bounds(len(train), batch_size):
            idx = order[start:stop]
            if augment_generator is None:
                x = table[idx]
            else:
                x = train.normalize(augment_crop_flip(images[idx], augment_generator, augment))
            yield epoch, x, labels[idx]


def fit_module(
    model: torch.nn.Module,
    recipe: Recipe,
    train: ImageData,
    seed: int,
    device: torch.device | str = "cpu",
    loss_fn: LossFn = cross_entropy_loss,
    on_step: Callable[[int, torch.nn.Module], None] | None = None,
) -> float:
    """Train `model` in place with `recipe` (SGD, schedule) in seed `seed`'s data order;
    returns the final epoch's mean loss. `loss_fn(model, x, y)` lets a method change the
    objective (e.g. an ELBO) while keeping the recipe's optimizer and schedule.
    `on_step(step, model)`, if given, is called after each optimizer step (steps 1, 2, ...)."""
    model.train()
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=recipe.lr,
        momentum=recipe.momentum,
        nesterov=recipe.nesterov,
        weight_decay=recipe.weight_decay,
    )
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)  # no host sync per step
    current_epoch = -1
    batches = seed_batches(train, recipe.batch_size, seed, recipe.epochs, device, recipe.augment)
    for step, (epoch, x, y) in enumerate(batches, start=1):
        if epoch != current_epoch:
            current_epoch = epoch
            for group in optimizer.param_groups:
                group["lr"] = recipe.lr_at(epoch)
            loss_sum.zero_()
        loss = loss_fn(model, x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_sum += loss.detach() * x.shape[0]
        if on_step is not None:
            on_step(step, model)
    return float(loss_sum) / len(train)
