"""The HMC potential of an experiment's network over its whole training set, and the chains
of networks (docs/maths.md 4.7).

With N training pairs, the prior precision lambda = N x weight decay (the prior as a weight
decay on the mean loss, as for SGHMC's fixed prior) and a temperature T,

    U(theta) = (sum_i CE(f_theta(x_i), y_i) + lambda / 2 ||theta||^2) / T

over every parameter of the network (weights and biases; the batched trainer takes no
buffers). The sum runs over the training set in pieces of `piece` pairs through the batched
trainer's passes (`symbnn.train.stepping.StackedGradients`, a chain per model row), in the
pass's dtype (float32 by default): each piece's mean loss and gradient times its size, the
pieces, the prior and the temperature then combined in float64. The hand-written OptuNet and
MLP passes compute a model's numbers independently of the models beside it (the trainer's
guarantee), so a chain is bit for bit the same alone or in any batch; the generic (vmap)
pass of other networks makes no such promise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from symbnn.data.core import ImageData, TensorData
from symbnn.reference.hmc import REFERENCE, HmcRun, HmcSettings, run_chains
from symbnn.train.batched import stacked_net
from symbnn.train.batches import batch_bounds
from symbnn.train.flat import FlatStack
from symbnn.train.seeding import build_seeded_model
from symbnn.train.stepping import StackedGradients, chunks_of, in_shards

# the pieces the full batch is summed over: large enough to keep per-op overheads small
DEFAULT_PIECE = 500


def prior_precision(n_train: int, weight_decay: float) -> float:
    """lambda = N x weight decay: the Gaussian prior whose negative log density, divided by
    N, is the weight-decay penalty weight_decay / 2 ||theta||^2 on the mean loss."""
    if n_train < 1 or weight_decay < 0:
        raise ValueError(
            f"the prior precision needs N >= 1 and weight_decay >= 0, got {n_train}, {weight_decay}"
        )
    return n_train * weight_decay


@dataclass(frozen=True)
class Layout:
    """A network's parameters as one vector: names, shapes, in `named_parameters` order."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, model: torch.nn.Module) -> Layout:
        named = list(model.named_parameters())
        return cls(tuple(n for n, _ in named), tuple(tuple(p.shape) for _, p in named))

    @property
    def size(self) -> int:
        return sum(math.prod(shape) for shape in self.shapes)

    def flatten(self, state: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Stacked parameters name -> (K, *shape) as (K, D) float64."""
        missing = [name for name in self.names if name not in state]
        if missing:
            raise ValueError(f"the starting states lack the parameters {missing}")
        rows = {state[name].shape[0] for name in self.names}
        if len(rows) != 1:
            raise ValueError(f"the starting states disagree on the number of chains: {rows}")
        (k,) = rows
        for name, shape in zip(self.names, self.shapes, strict=True):
            if tuple(state[name].shape[1:]) != shape:
                raise ValueError(
                    f"starting state {name!r} has shape {tuple(state[name].shape[1:])}, the "
                    f"model's is {shape}"
                )
        return torch.cat([state[name].reshape(k, -1).to(torch.float64) for name in self.names], 1)

    def unflatten(self, vectors: torch.Tensor, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        """(..., D) vectors as name -> (..., *shape) tensors of `dtype` on the CPU."""
        sizes = [math.prod(shape) for shape in self.shapes]
        lead = vectors.shape[:-1]
        parts = vectors.to("cpu", dtype).split(sizes, dim=-1)
        return {
            name: part.reshape(*lead, *shape).clone()
            for name, part, shape in zip(self.names, parts, self.shapes, strict=True)
        }


class FullBatchPotential:
    """U and its gradient for `k` chains of one network (a `symbnn.reference.hmc.Potential`)."""

    def __init__(
        self,
        net: Any,
        targets: torch.Tensor,
        layout: Layout,
        k: int,
        precision: float,
        temperature: float = REFERENCE.temperature,
        piece: int = DEFAULT_PIECE,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if temperature <= 0:
            raise ValueError(f"the temperature must be positive, got {temperature}")
        n = targets.shape[0]
        self.precision, self.temperature = float(precision), float(temperature)
        self.params = FlatStack(dict(zip(layout.names, layout.shapes)), k, device, dtype)
        self.grads = self.params.zeros_like()
        self.gradients = StackedGradients(
            net, targets.to(device), "cross_entropy", chunks_of(net, piece, k, None, device)
        )
        self.pieces = [
            torch.arange(start, stop, device=device) for start, stop in batch_bounds(n, piece)
        ]
        self.evaluations = 0  # full-batch gradients, per chain

    def __call__(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k = theta.shape[0]
        self.params.unpack_(theta.to(self.params.data.dtype))
        nll = torch.zeros(k, dtype=torch.float64, device=theta.device)
        grad = torch.zeros_like(theta)
        for idx in self.pieces:
            size = float(idx.shape[0])
            losses = self.gradients(self.params, idx.expand(k, -1), self.grads)
            nll = nll + losses.to(torch.float64) * size
            grad = grad + self.grads.packed().to(torch.float64) * size
        self.evaluations += 1
        prior = (theta * theta).sum(1) * (0.5 * self.precision)
        u = (nll + prior) / self.temperature
        grad = (grad + theta * self.precision) / self.temperature
        return u, grad


@dataclass
class NetworkChains:
    """HMC chains of a network: `states` name -> (K, draws, *shape) (the kept samples as
    the model's parameters, in the pass's dtype), `run` the sampler's record (float64
    samples and per-sample statistics), `evaluations` the full-batch gradients per chain."""

    states: dict[str, torch.Tensor]
    run: HmcRun
    evaluations: int


def _classification_targets(train: ImageData | TensorData) -> torch.Tensor:
    targets = train.targets
    if targets.dtype != torch.int64:
        raise ValueError(
            f"HMC's likelihood is the cross-entropy of class labels; dataset {train.name!r} "
            f"has {targets.dtype} targets"
        )
    return targets


def sample_network(
    model_spec: dict[str, Any],
    train: ImageData | TensorData,
    initial: Mapping[str, torch.Tensor],
    seeds: Sequence[int],
    settings: HmcSettings,
    precision: float,
    *,
    temperature: float = REFERENCE.temperature,
    piece: int = DEFAULT_PIECE,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    generic: bool = False,
) -> NetworkChains:
    """One HMC chain per seed of the network `model_spec` on the whole of `train`, chain k
    starting from the parameters `initial` (name -> (K, *shape)) row k. On a CPU the chains
    are split into one shard per torch thread, each run start to end on its own thread (the
    batched trainer's sharding): a chain's numbers do not depend on the split."""
    template = build_seeded_model(model_spec, 0)
    if any(True for _ in template.buffers()):
        raise ValueError(
            f"HMC runs through the batched trainer's passes, which take no buffers; the model "
            f"{model_spec.get('name')!r} has some (BatchNorm)"
        )
    targets = _classification_targets(train)
    layout = Layout.of(template)
    theta = layout.flatten(initial)
    if theta.shape[0] != len(seeds):
        raise ValueError(f"{theta.shape[0]} starting states for {len(seeds)} chain seeds")
    net = stacked_net(template, train, device, "none", generic, dtype)

    def shard(part: slice) -> tuple[HmcRun, int]:
        seeds_part = list(seeds[part])
        potential = FullBatchPotential(
            net, targets, layout, len(seeds_part), precision, temperature, piece, device, dtype
        )
        run = run_chains(potential, theta[part].to(device), seeds_part, settings)
        return run, potential.evaluations

    results = in_shards(shard, len(seeds), device)
    run = _joined([r for r, _ in results])
    return NetworkChains(layout.unflatten(run.samples, dtype), run, results[0][1])


def _joined(runs: list[HmcRun]) -> HmcRun:
    """The shards' runs as one, chain after chain."""
    if len(runs) == 1:
        return runs[0]
    fields = {}
    for name in HmcRun.__dataclass_fields__:
        parts = [getattr(r, name) for r in runs]
        fields[name] = (
            torch.cat(parts) if isinstance(parts[0], torch.Tensor) else np.concatenate(parts)
        )
    return HmcRun(**fields)
