"""The batched trainer: K models of one architecture stepped together on stacked parameters.

Each model keeps its own initial weights, data order and (if the recipe asks) augmentation,
drawn from its seed's generators exactly as the loop trainer draws them; only the arithmetic
is batched. Models go through forward/backward in chunks of the model axis, which changes no
result (tested bit for bit): on a CPU, a chunk holds about `chunk_bytes` of intermediates (a
stacked net's own figure, CPU_CHUNK_BYTES by default), and with several threads the chunks run
side by side (`symbnn.train.parallel`); on a GPU one chunk holds every model.
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
from symbnn.train.parallel import cpu_workers, in_threads, one_thread_per_op
from symbnn.train.seeding import build_seeded_model, init_parameters, seed_generator
from symbnn.train.sgd import StackedSGD
from symbnn.train.stacked import VmapNet

# intermediates per chunk on a CPU, unless the stacked net says otherwise
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


def split(k: int, parts: int) -> list[slice]:
    """range(k) in `parts` consecutive slices whose sizes differ by one at most."""
    return [slice(i * k // parts, (i + 1) * k // parts) for i in range(parts)]


def default_chunks(net, batch_size: int, k: int, device: torch.device | str) -> list[slice]:
    """The models of each forward/backward: all of them on an accelerator; on a CPU about the
    net's `chunk_bytes` of intermediates a chunk, in chunks of even size and two models at
    least (see `_train_shard`)."""
    if torch.device(device).type != "cpu":
        return [slice(0, k)]
    budget = getattr(net, "chunk_bytes", CPU_CHUNK_BYTES)
    by_size = max(2, budget // max(1, net.bytes_per_model(batch_size)))
    return split(k, min(max(1, k // 2), -(-k // by_size)))


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
    stacked = {name: torch.stack([d[name] for d in draws]).to(device, dtype) for name in draws[0]}
    del draws

    net = stacked_net(template, train, device, recipe.augment, generic, dtype)
    k = len(seeds)
    # models are independent: on several CPU threads, each trains its own shard of them from
    # start to end, with no step in common
    workers = cpu_workers(device, k)
    shards = split(k, workers)
    bar = progress_bar(
        total=recipe.epochs * len(batch_bounds(len(train), recipe.batch_size)) * k,
        desc=f"train ({k} models)",
        unit="model-step",
        enabled=progress,
    )

    def train_shard(part: slice) -> tuple[FlatStack, torch.Tensor]:
        return _train_shard(
            net,
            recipe,
            train,
            [seeds[i] for i in range(part.start, part.stop)],
            FlatStack.of({name: p[part] for name, p in stacked.items()}),
            chunk,
            loss,
            device,
            bar,
        )

    with one_thread_per_op(device):
        results = in_threads(train_shard, shards)
    bar.close()
    params = {name: torch.cat([shard.views[name] for shard, _ in results]) for name in stacked}
    return params, torch.cat([losses for _, losses in results]), template


def _train_shard(
    net,
    recipe: Recipe,
    train: ImageData | TensorData,
    seeds: Sequence[int],
    params: FlatStack,
    chunk: int | None,
    loss: str,
    device: torch.device | str,
    bar,
) -> tuple[FlatStack, torch.Tensor]:
    """Train the models of `params` (seeds `seeds`) in place: returns them and their
    final-epoch mean losses."""
    k, n = len(seeds), len(train)
    if chunk:
        chunks = [slice(start, min(start + chunk, k)) for start in range(0, k, chunk)]
    else:
        chunks = default_chunks(net, recipe.batch_size, k, device)
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

    for epoch in range(recipe.epochs):
        lr = recipe.lr_at(epoch)
        orders = epoch_orders(n, order_generators).to(device)
        loss_sum.zero_()
        for start, stop in batch_bounds(n, recipe.batch_size):
            idx = orders[:, start:stop]
            for part in chunks:
                step_chunk(part, idx, stop - start)
            optimizer.step({"all": grads.data}, lr, scratch=True)
            bar.update(k)
    return params, loss_sum / n
