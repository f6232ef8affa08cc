"""The batched trainer: K models of one architecture stepped together on stacked parameters.

Each model keeps its own initial weights, data order and (if the recipe asks) augmentation,
drawn from its seed's generators exactly as the loop trainer draws them; only the arithmetic
is batched. Models go through forward/backward in chunks of the model axis, which changes no
result (tested bit for bit): on a CPU, a chunk holds about `chunk_bytes` of intermediates (a
stacked net's own figure, CPU_CHUNK_BYTES by default), and with several threads the chunks run
side by side (`symbnn.train.parallel`); on a GPU one chunk holds every model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from symbnn.data.core import ImageData, TensorData
from symbnn.progress import progress as progress_bar
from symbnn.settings import Recipe
from symbnn.train import mlp_stacked, optunet_stacked
from symbnn.train.batches import batch_bounds
from symbnn.train.flat import FlatStack
from symbnn.train.seeding import build_seeded_model, init_parameters, seed_generator
from symbnn.train.sgd import StackedSGD
from symbnn.train.stacked import VmapNet
from symbnn.train.stepping import (
    CPU_CHUNK_BYTES,
    Masks,
    StackedGradients,
    Step,
    batch_steps,
    chunks_of,
    default_chunks,
    in_shards,
    split,
)

__all__ = [
    "CPU_CHUNK_BYTES",
    "default_chunks",
    "hand_written",
    "seeded_parameters",
    "split",
    "stacked_net",
    "train_batched",
]

# (step, the shard's models as indices into the whole stack, the shard's parameters, their
# gradients): an update of the parameters in place, instead of SGD
Update = Callable[[Step, range, FlatStack, FlatStack], None]
# (step, the shard's models, the shard's parameters) after each update
OnStep = Callable[[Step, range, FlatStack], None]


def hand_written(model: torch.nn.Module, train: ImageData | TensorData, augment: str) -> bool:
    """Whether `stacked_net` trains `model` with a hand-written pass (OptuNet, MLPs, no
    augmentation): the models the methods fit in one batched run."""
    if augment != "none" or any(True for _ in model.buffers()):
        return False
    return (optunet_stacked.supports(model) and isinstance(train, ImageData)) or (
        mlp_stacked.supports(model)
    )


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
    *,
    initial: Mapping[str, torch.Tensor] | None = None,
    lr: Callable[[Step], float] | None = None,
    masks: Masks | None = None,
    update: Update | None = None,
    on_step: OnStep | None = None,
    steps: int | None = None,
    desc: str = "train",
) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.nn.Module]:
    """Train the seeds together: the one stacked trainer of symbnn (target posteriors,
    the analyses' many small MLPs, symmetrised VI's SGD runs, the methods' fits). Returns the
    stacked parameters (name -> (K, *shape), on `device`, in `dtype`), the final-epoch mean
    losses (K,) and one of the models (the architecture). `loss` is one of
    `symbnn.train.losses.LOSSES`; `chunk` models go through each forward/backward (default:
    by size on a CPU, all on a GPU); `generic` forces the vmap formulation (for comparisons).

    A seed gives its model's initial weights and data order (and augmentation). What the
    methods change, each model's computation still its own:
    - `initial`: stacked initial parameters (name -> (K, *shape)) instead of the seeds';
    - `lr(step)`: each step's learning rate (default: the recipe's schedule, by epoch);
    - `masks(models, batch)`: dropout factors of the models' layer inputs, each model's from
      its own generator (hand-written passes only);
    - `update(step, models, params, grads)`: replaces the SGD update (`models`: the indices
      of the shard's rows in the whole stack);
    - `on_step(step, models, params)`: called after each update (snapshots);
    - `steps`: stop after this many steps (default: the recipe's epochs)."""
    template = build_seeded_model(model_spec, seeds[0])
    if any(True for _ in template.buffers()):
        raise ValueError("the batched trainer needs a model without buffers; use the loop trainer")
    stacked = _initial_parameters(template, seeds, initial, device, dtype)
    net = stacked_net(template, train, device, recipe.augment, generic, dtype)
    if masks is not None and isinstance(net, VmapNet):
        raise ValueError("dropout masks need a hand-written stacked pass (OptuNet or MLP)")
    k = len(seeds)
    per_epoch = len(batch_bounds(len(train), recipe.batch_size))
    total = recipe.epochs * per_epoch if steps is None else steps
    bar = progress_bar(
        total=total * k, desc=f"{desc} ({k} models)", unit="model-step", enabled=progress
    )
    run = _ShardRun(
        net, recipe, train, seeds, chunk, loss, device, bar, lr, masks, update, on_step, total
    )
    results = in_shards(
        lambda part: run(part, FlatStack.of({name: p[part] for name, p in stacked.items()})),
        k,
        device,
    )
    bar.close()
    params = {name: torch.cat([shard.views[name] for shard, _ in results]) for name in stacked}
    return params, torch.cat([losses for _, losses in results]), template


def _initial_parameters(
    template: torch.nn.Module,
    seeds: Sequence[int],
    initial: Mapping[str, torch.Tensor] | None,
    device: torch.device | str,
    dtype: torch.dtype,
) -> dict[str, torch.Tensor]:
    """name -> (K, *shape): `initial`, checked against the model, or each seed's draw."""
    shapes = {name: p.shape for name, p in template.named_parameters()}
    if initial is not None:
        got = {name: tuple(t.shape) for name, t in initial.items()}
        want = {name: (len(seeds), *shape) for name, shape in shapes.items()}
        if got != want:
            raise ValueError(f"initial parameters {got} do not match the model's {want}")
        return {name: initial[name].to(device, dtype) for name in shapes}
    return seeded_parameters(template, seeds, device, dtype)


def seeded_parameters(
    template: torch.nn.Module,
    seeds: Sequence[int],
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> dict[str, torch.Tensor]:
    """name -> (K, *shape): each seed's initial parameters (`build_seeded_model`'s)."""
    # every parameter is redrawn from the seed's own stream: one module serves all seeds
    draws = [
        {name: p.detach().clone() for name, p in init_parameters(template, gen).named_parameters()}
        for gen in (seed_generator(seed, "init") for seed in seeds)
    ]
    return {name: torch.stack([d[name] for d in draws]).to(device, dtype) for name in draws[0]}


@dataclass
class _ShardRun:
    """Training of one shard of the models (their rows of the stack), start to end: what
    `train_batched` was asked, `total` the steps to run."""

    net: Any
    recipe: Recipe
    train: ImageData | TensorData
    seeds: Sequence[int]
    chunk: int | None
    loss: str
    device: torch.device | str
    bar: Any
    lr: Callable[[Step], float] | None
    masks: Masks | None
    update: Update | None
    on_step: OnStep | None
    total: int

    def __call__(self, part: slice, params: FlatStack) -> tuple[FlatStack, torch.Tensor]:
        """Train the shard's models `params` (rows `part` of the stack) in place: returns them
        and their final-epoch mean losses."""
        recipe, device, n = self.recipe, self.device, len(self.train)
        seeds = self.seeds[part]
        models = range(part.start, part.stop)
        k = len(seeds)
        gradients = StackedGradients(
            self.net,
            self.train.targets.to(device),
            self.loss,
            chunks_of(self.net, recipe.batch_size, k, self.chunk, device),
        )
        order_generators = [seed_generator(seed, "order") for seed in seeds]
        augment_generators = (
            [seed_generator(seed, "augment") for seed in seeds]
            if recipe.augment != "none"
            else None
        )
        masks = None
        if self.masks is not None:

            def masks(chunk: range, batch: int) -> dict[str, torch.Tensor] | None:
                return self.masks(range(part.start + chunk.start, part.start + chunk.stop), batch)

        grads = params.zeros_like()
        # one tensor for every parameter of every model: the update is a few elementwise ops
        optimizer = StackedSGD(
            {"all": params.data}, recipe.momentum, recipe.nesterov, recipe.weight_decay
        )
        loss_sum = torch.zeros(k, dtype=torch.float64, device=device)  # no host sync per step
        epochs = -(-self.total // len(batch_bounds(n, recipe.batch_size)))
        for step, idx in batch_steps(n, recipe.batch_size, epochs, order_generators, device):
            if step.opens_epoch:
                loss_sum.zero_()
            losses = gradients(params, idx, grads, augment_generators, masks)
            loss_sum += losses * step.size
            if self.update is None:
                lr = self.lr(step) if self.lr else recipe.lr_at(step.epoch)
                optimizer.step({"all": grads.data}, lr, scratch=True)
            else:
                self.update(step, models, params, grads)
            if self.on_step is not None:
                self.on_step(step, models, params)
            self.bar.update(k)
            if step.number == self.total:
                break
        return params, loss_sum / n
