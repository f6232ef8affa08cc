"""The pieces of a batched run that every user of stacked models shares: the step-by-step batch
indices of K data orders, one step's gradients of a stack of models chunk by chunk, and the
models split into shards, one per CPU thread.

The batched trainer (`symbnn.train.batched`) is these pieces with an SGD update; the methods'
batched fits (`symbnn.methods`) put their own update or parameterisation around the same
steps. Each model's arithmetic depends on nothing but its own rows (tested bit for bit), so
what a model computes does not depend on the models beside it, on the chunking or on the
number of threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch

from symbnn.train.batches import batch_bounds, epoch_orders
from symbnn.train.flat import FlatStack
from symbnn.train.parallel import cpu_workers, in_threads, one_thread_per_op

# intermediates per chunk on a CPU, unless the stacked net says otherwise
CPU_CHUNK_BYTES = 16 << 20

R = TypeVar("R")

# (models of a chunk, as indices into the stack, batch size) -> per layer name the factor
# (k, B, in_features) its input is multiplied by (dropout), or None
Masks = Callable[[range, int], dict[str, torch.Tensor] | None]


@dataclass(frozen=True)
class Step:
    """Where a step lies: its number over the whole run (from 1), its epoch (from 0), whether
    it opens its epoch, and its batch size."""

    number: int
    epoch: int
    opens_epoch: bool
    size: int


def batch_steps(
    n: int,
    batch_size: int,
    epochs: int,
    order_generators: Sequence[torch.Generator],
    device: torch.device | str,
) -> Iterator[tuple[Step, torch.Tensor]]:
    """Every step of `epochs` epochs over `n` samples: the step and the (K, B) sample indices of
    the K models, each epoch a fresh permutation per model from its own generator (drawn when
    the epoch starts, as the loop trainer draws it)."""
    number = 0
    bounds = batch_bounds(n, batch_size)
    for epoch in range(epochs):
        orders = epoch_orders(n, list(order_generators)).to(device)
        for i, (start, stop) in enumerate(bounds):
            number += 1
            yield Step(number, epoch, i == 0, stop - start), orders[:, start:stop]


def split(k: int, parts: int) -> list[slice]:
    """range(k) in `parts` consecutive slices whose sizes differ by one at most."""
    return [slice(i * k // parts, (i + 1) * k // parts) for i in range(parts)]


def default_chunks(net, batch_size: int, k: int, device: torch.device | str) -> list[slice]:
    """The models of each forward/backward: all of them on an accelerator; on a CPU about the
    net's `chunk_bytes` of intermediates a chunk, in chunks of even size and two models at
    least (see `StackedGradients`)."""
    if torch.device(device).type != "cpu":
        return [slice(0, k)]
    budget = getattr(net, "chunk_bytes", CPU_CHUNK_BYTES)
    by_size = max(2, budget // max(1, net.bytes_per_model(batch_size)))
    return split(k, min(max(1, k // 2), -(-k // by_size)))


def chunks_of(
    net, batch_size: int, k: int, chunk: int | None, device: torch.device | str
) -> list[slice]:
    """`chunk` models a chunk when given, else `default_chunks`."""
    if chunk:
        return [slice(start, min(start + chunk, k)) for start in range(0, k, chunk)]
    return default_chunks(net, batch_size, k, device)


class StackedGradients:
    """One step's mean losses and gradients of a stack of models, each on its own batch, chunk
    by chunk (`chunks`: slices of the stack)."""

    def __init__(self, net, targets: torch.Tensor, loss: str, chunks: list[slice]) -> None:
        self.net, self.targets, self.loss, self.chunks = net, targets, loss, chunks

    def __call__(
        self,
        params: FlatStack,
        idx: torch.Tensor,
        grads: FlatStack,
        augment_generators: Sequence[torch.Generator] | None = None,
        masks: Masks | None = None,
    ) -> torch.Tensor:
        """Each model's mean loss (K,) on its batch `idx` (K, B); the gradients go into
        `grads`. `masks` draws the dropout factors of a chunk's models."""
        losses = torch.empty(idx.shape[0], dtype=params.data.dtype, device=params.data.device)
        for part in self.chunks:
            losses[part] = self._chunk(params, idx, grads, part, augment_generators, masks)
        return losses

    def _chunk(self, params, idx, grads, part, augment_generators, masks) -> torch.Tensor:
        net, targets = self.net, self.targets
        factors = masks(range(part.start, part.stop), idx.shape[1]) if masks else None
        options = {"masks": factors} if factors else {}
        if part.stop - part.start == 1 and getattr(net, "exact", False):
            # torch computes a batch of one product by another route (a matrix-vector
            # product where the result has one column) that rounds differently: a lone model
            # steps in a pair with a copy of itself, so that it computes what it would in any
            # larger chunk
            pair, pair_grads = params.repeat_row(part.start, 2), grads.zeros_like(2)
            if factors:
                options = {
                    "masks": {name: f.expand(2, *f.shape[1:]) for name, f in factors.items()}
                }
            losses = net.loss_and_grads(
                pair.views,
                net.inputs(idx[part].expand(2, -1)),
                targets[idx[part]].expand(2, -1),
                self.loss,
                pair_grads.views,
                **options,
            )[:1]
            grads.data[part] = pair_grads.data[:1]
            return losses
        gens = augment_generators[part] if augment_generators else None
        return net.loss_and_grads(
            params.rows(part),
            net.inputs(idx[part], gens),
            targets[idx[part]],
            self.loss,
            grads.rows(part),
            **options,
        )


def in_shards(fn: Callable[[slice], R], k: int, device: torch.device | str) -> list[R]:
    """`fn(shard)` for the shards of `k` models: one per CPU thread (torch's thread count, at
    most one per model), each on a thread of its own whose torch ops run on one thread; one
    shard on an accelerator. Models are independent: each shard runs from start to end with no
    step in common."""
    shards = split(k, cpu_workers(device, k))  # before one_thread_per_op sets one thread
    with one_thread_per_op(device):
        return in_threads(fn, shards)
