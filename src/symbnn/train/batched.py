"""The batched trainer: K models of one architecture stepped together on stacked parameters.

Each model keeps its own initial weights, data order and (if the recipe asks) augmentation,
drawn from its seed's generators exactly as the loop trainer draws them; only the arithmetic
is batched. Models go through forward/backward in chunks of the model axis, which changes no
result (tested bit for bit): on a CPU, chunks of about 16 MiB of intermediates ran faster
than the whole stack (OptuNet, K = 128, one thread: about 620 vs 440 model-steps per
CPU-second, chunks of 17 vs 128); on a GPU one chunk holds every model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from symbnn.data.core import ImageData, TensorData
from symbnn.progress import progress as progress_bar
from symbnn.settings import Recipe
from symbnn.train import mlp_stacked, optunet_stacked
from symbnn.train.batches import batch_bounds, epoch_orders
from symbnn.train.flat import FlatStack
from symbnn.train.parallel import chunk_runner, cpu_workers
from symbnn.train.seeding import build_seeded_model, init_parameters, seed_generator
from symbnn.train.sgd import StackedSGD
from symbnn.train.stacked import VmapNet

# intermediates per chunk on a CPU (a size that stays in the L3 cache of small servers)
CPU_CHUNK_BYTES = 16 << 20


def stacked_net(
    model: torch.nn.Module,
    train: ImageData | TensorData,
    device: torch.device | str,
    augment: str,
    generic: bool = False,
    dtype: torch.dtype = torch.float32,
):
    """The fastest stacked formulation for `model`: the hand-written OptuNet and MLP passes
    when they apply (unless `generic`), vmap otherwise (images only)."""
    if not generic and augment == "none":
        if optunet_stacked.supports(model) and isinstance(train, ImageData):
            return optunet_stacked.OptuNetStacked(model, train, device, dtype)
        if mlp_stacked.supports(model):
            return mlp_stacked.MLPStacked(model, train, device, dtype)
    if not isinstance(train, ImageData):
        raise ValueError(f"tabular data trains MLPs only, not {type(model).__name__}")
    return VmapNet(model, train, device, augment=augment)


def default_chunk(net, batch_size: int, k: int, device: torch.device | str, workers: int) -> int:
    """Models per forward/backward: all of them on an accelerator; on a CPU about
    CPU_CHUNK_BYTES of intermediates, in chunks of even size, a multiple of the workers in
    number where there are enough models, and two models at least (see `train_batched`)."""
    if torch.device(device).type != "cpu":
        return k
    by_size = max(2, CPU_CHUNK_BYTES // max(1, net.bytes_per_model(batch_size)))
    n_chunks = -(-k // by_size)
    n_chunks = min(max(1, k // 2), -(-n_chunks // workers) * workers)
    return -(-k // n_chunks)


def train_batched(
    model_spec: dict[str, Any],
    recipe: Recipe,
    train: ImageData | TensorData,
    seeds: Sequence[int],
    device: torch.device | str = "cpu",
    progress: bool = False,
    chunk: int | None = None,
    generic: bool = False,
    loss: str = "cross_entropy",
    dtype: torch.dtype = torch.float32,
) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.nn.Module]:
    """Train the seeds together: the one stacked trainer of symbnn (target posteriors,
    the analyses' many small MLPs, symmetrised VI's SGD runs). Returns the stacked parameters
    (name -> (K, *shape), on `device`, in `dtype`), the final-epoch mean losses (K,) and one
    of the models (the architecture). `loss` is one of `symbnn.train.losses.LOSSES`; `chunk`
    models go through each forward/backward (default: by size on a CPU, all on a GPU);
    `generic` forces the vmap formulation (for comparisons)."""
    template = build_seeded_model(model_spec, seeds[0])
    if any(True for _ in template.buffers()):
        raise ValueError("the batched trainer needs a model without buffers; use the loop trainer")
    # every parameter is redrawn from the seed's own stream: one module serves all seeds
    draws = [
        {name: p.detach().clone() for name, p in init_parameters(template, gen).named_parameters()}
        for gen in (seed_generator(seed, "init") for seed in seeds)
    ]
    params = FlatStack.of(
        {name: torch.stack([d[name] for d in draws]).to(device, dtype) for name in draws[0]}
    )
    del draws

    net = stacked_net(template, train, device, recipe.augment, generic, dtype)
    k, n = len(seeds), len(train)
    workers = cpu_workers(device, k)
    chunk = chunk or default_chunk(net, recipe.batch_size, k, device, workers)
    chunks = [slice(start, min(start + chunk, k)) for start in range(0, k, chunk)]
    order_generators = [seed_generator(seed, "order") for seed in seeds]
    augment_generators = (
        [seed_generator(seed, "augment") for seed in seeds] if recipe.augment != "none" else None
    )
    targets = train.targets.to(device)
    grads = params.zeros_like()
    # one tensor for every parameter of every model: the update is a few elementwise ops
    optimizer = StackedSGD(
        {"all": params.data}, recipe.momentum, recipe.nesterov, recipe.weight_decay
    )
    loss_sum = torch.zeros(k, dtype=torch.float64, device=device)  # no host sync per step

    def step_chunk(part: slice, idx: torch.Tensor, size: int) -> None:
        gens = augment_generators[part] if augment_generators else None
        if part.stop - part.start == 1 and getattr(net, "exact", False):
            # torch computes a batch of one product by another route (a matrix-vector
            # product where the result has one column) that rounds differently: a lone model
            # steps in a pair with a copy of itself, so that it computes what it would in any
            # larger chunk
            pair, pair_grads = params.repeat_row(part.start, 2), grads.zeros_like(2)
            losses = net.loss_and_grads(
                pair.views,
                net.inputs(idx[part].expand(2, -1)),
                targets[idx[part]].expand(2, -1),
                loss,
                pair_grads.views,
            )[:1]
            grads.data[part] = pair_grads.data[:1]
        else:
            losses = net.loss_and_grads(
                params.rows(part),
                net.inputs(idx[part], gens),
                targets[idx[part]],
                loss,
                grads.rows(part),
            )
        loss_sum[part] += losses * size

    bounds = batch_bounds(n, recipe.batch_size)
    bar = progress_bar(
        total=recipe.epochs * len(bounds), desc=f"train ({k} models)", unit="step", enabled=progress
    )
    with chunk_runner(workers, device) as run:
        for epoch in range(recipe.epochs):
            lr = recipe.lr_at(epoch)
            orders = epoch_orders(n, order_generators).to(device)
            loss_sum.zero_()
            for start, stop in bounds:
                idx = orders[:, start:stop]
                run(step_chunk, [(part, idx, stop - start) for part in chunks])
                optimizer.step({"all": grads.data}, lr)
                bar.update()
    bar.close()
    return params.unflatten(), loss_sum / n, template
