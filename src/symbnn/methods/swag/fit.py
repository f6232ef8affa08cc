"""SWA-Gaussian (SWAG), fitted by continuing SGD from a trained mode.

Reference: W. J. Maddox, T. Garipov, P. Izmailov, D. Vetrov, A. G. Wilson, "A Simple
Baseline for Bayesian Uncertainty in Deep Learning", NeurIPS 2019 (section 4, equations
(1)-(3)).

Fit. From the mode, SGD continues with the recipe's momentum, Nesterov flag and weight decay
for `epochs` epochs (default twice the recipe's; data order from `seed_batches`, with a seed
derived from (mode.seed, seed)). The learning rate follows the SWA schedule of the reference
code (torch's SWALR): over the first R0 = floor(`ramp` T) of the T steps it rises linearly
from the recipe's last learning rate (where the mode ended) to the high rate `lr` (default:
the recipe's initial rate), and stays there. After the ramp, K = `snapshots` evenly spaced
iterates are collected, after steps R0 + floor(k (T - R0) / K), k = 1..K (the last at the
end). With theta_1..theta_K the flattened parameter vectors:

    theta_SWA  = (1/K) sum_k theta_k,
    Sigma_diag = max((1/K) sum_k theta_k^2 - theta_SWA^2, 0)          (element-wise),
    D          = [theta_k - theta_bar_k]  for the last R = min(`rank`, K) snapshots,

where theta_bar_k is the running mean after the k-th snapshot (the paper's D-hat).

Sampling, with the reference implementation's convention (the one the paper's "scale 0.1"
refers to). With z1 ~ N(0, I_d), z2 ~ N(0, I_R) and s = `scale`,

    theta = theta_SWA + s^(1/2) * ( Sigma_diag^(1/2) * z1 + D z2 / sqrt(R - 1) ),

a Gaussian with covariance s * ( diag(Sigma_diag) + D D^T / (R - 1) ) (the SWAG paper's
covariance, which halves both terms, is scale 0.5). The low-rank term needs R >= 2: `rank` 1
gives SWAG-Diagonal, theta_SWA + s^(1/2) Sigma_diag^(1/2) z1. `SwagMoments` implements the
moments and this sampler on flat vectors.

The modes of a block are fitted together in the batched trainer where it has a hand-written
pass for the model (`fit_swag_batched`: the same schedule, data orders and snapshots, each
mode's run what it is alone), else one by one with `torch.optim.SGD` (`fit_swag`, the
reference).

Only parameters follow the Gaussian. When the model has BatchNorm layers and `bn_update` is
true, every sample's running statistics are recomputed by one pass over the training data
(in order, without augmentation) in train mode without gradients, each batch weighted by its
size (`refresh_batchnorm`), as the paper does; otherwise the sample keeps the buffers of the
last SGD iterate.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from symbnn.methods.base import (
    Fitted,
    Mode,
    Problem,
    check_count,
    fits_in_batch,
    generator,
    stacked_states,
)
from symbnn.methods.base import data_order_seed as base_data_order_seed
from symbnn.settings import Recipe, Swag
from symbnn.train.batched import train_batched
from symbnn.train.batchnorm import batchnorm_layers, refresh_batchnorm, training_inputs
from symbnn.train.evaluate import unstack
from symbnn.train.flat import FlatStack
from symbnn.train.loop import seed_batches
from symbnn.train.stepping import Step

NAME = "swag"
_DATA_ORDER_TAG = 0x5357  # "SW": separates this method's data-order seeds from others'


class SwagMoments:
    """Running SWAG statistics of flat vectors of length `dim`: first and second moments
    (kept in float64) and the last `rank` deviations from the running mean (a ring buffer)."""

    def __init__(
        self,
        dim: int,
        rank: int,
        device: torch.device | str = "cpu",
        deviation_dtype: torch.dtype = torch.float64,
    ) -> None:
        if dim < 1 or rank < 0:
            raise ValueError(
                f"SwagMoments needs dim >= 1 and rank >= 0, got dim={dim}, rank={rank}"
            )
        self.dim, self.rank = int(dim), int(rank)
        self.n = 0
        self._mean = torch.zeros(dim, dtype=torch.float64, device=device)
        self._sq_mean = torch.zeros(dim, dtype=torch.float64, device=device)
        self._dev = torch.zeros(rank, dim, dtype=deviation_dtype, device=device)  # rows
        self._stored = 0  # deviations held (<= rank)
        self._next = 0  # ring-buffer row the next deviation overwrites

    def collect(self, vector: torch.Tensor) -> None:
        """Add one iterate (any shape with `dim` elements)."""
        v = vector.detach().reshape(-1).to(self._mean.device, torch.float64)
        if v.numel() != self.dim:
            raise ValueError(f"expected a vector of {self.dim} elements, got {v.numel()}")
        self.n += 1
        weight = 1.0 / self.n
        self._mean.lerp_(v, weight)  # mean += (v - mean) / n
        self._sq_mean.lerp_(v.square(), weight)
        if self.rank:
            self._dev[self._next] = v - self._mean  # deviation from the updated running mean
            self._next = (self._next + 1) % self.rank
            self._stored = min(self._stored + 1, self.rank)

    @property
    def mean(self) -> torch.Tensor:
        """theta_SWA (float64, (dim,))."""
        return self._mean

    @property
    def diag_var(self) -> torch.Tensor:
        """Sigma_diag = max(E[theta^2] - theta_SWA^2, 0) (float64, (dim,))."""
        return (self._sq_mean - self._mean**2).clamp_(min=0.0)

    @property
    def deviations(self) -> torch.Tensor:
        """D: (dim, R) deviations of the last R = min(rank, n) iterates, oldest first."""
        if self._stored < self.rank:
            rows = self._dev[: self._stored]
        else:
            rows = torch.roll(self._dev, -self._next, dims=0)
        return rows.t()

    def to_dict(self) -> dict[str, Any]:
        """Everything `from_dict` needs to rebuild these moments exactly (CPU tensors)."""
        return {
            "n": self.n,
            "stored": self._stored,
            "next": self._next,
            "mean": self._mean.cpu(),
            "sq_mean": self._sq_mean.cpu(),
            "deviations": self._dev.cpu(),
        }

    @classmethod
    def from_dict(cls, saved: dict[str, Any], device: torch.device | str = "cpu") -> SwagMoments:
        deviations = saved["deviations"]
        moments = cls(saved["mean"].numel(), deviations.shape[0], device, deviations.dtype)
        moments.n, moments._stored, moments._next = saved["n"], saved["stored"], saved["next"]
        moments._mean.copy_(saved["mean"])
        moments._sq_mean.copy_(saved["sq_mean"])
        moments._dev.copy_(deviations)
        return moments

    def sample(
        self, n: int, gen: torch.Generator | None = None, scale: float = 1.0
    ) -> torch.Tensor:
        """n draws (n, dim), float64: theta_SWA + scale^(1/2) (Sigma_diag^(1/2) z1
        + D z2 / sqrt(R - 1)); the low-rank term is left out while R < 2."""
        if self.n < 2:
            raise ValueError(f"SWAG needs at least 2 collected iterates to sample, has {self.n}")
        device = self._mean.device
        z1 = torch.randn(n, self.dim, generator=gen, device=device, dtype=torch.float64)
        out = z1.mul_(self.diag_var.sqrt())
        d = self.deviations
        if d.shape[1] >= 2:
            z2 = torch.randn(n, d.shape[1], generator=gen, device=device, dtype=torch.float64)
            low_rank = (z2.to(d.dtype) @ d.t()).to(torch.float64)
            out.add_(low_rank, alpha=1.0 / math.sqrt(d.shape[1] - 1))
        return out.mul_(math.sqrt(scale)).add_(self._mean)


def data_order_seed(mode_seed: int, seed: int) -> int:
    """The `seed_batches` seed of a SWAG fit: a deterministic function of (mode seed, seed)."""
    return base_data_order_seed(mode_seed, seed, _DATA_ORDER_TAG)


def fit_epochs(settings: Swag, recipe: Recipe) -> int:
    """SGD epochs of the fit: `epochs`, or twice the recipe's."""
    return settings.epochs or 2 * recipe.epochs


def schedule(settings: Swag, recipe: Recipe, steps_per_epoch: int) -> tuple[list[float], set[int]]:
    """(learning rate of each step 1..T, the steps after which an iterate is collected): a
    linear ramp from the recipe's last rate to the high rate, then constant (see the module
    docstring)."""
    epochs = fit_epochs(settings, recipe)
    total = epochs * steps_per_epoch
    ramp = int(settings.ramp * total)
    if total - ramp < settings.snapshots:
        raise ValueError(
            f"{NAME}.snapshots must be <= the {total - ramp} SGD steps after the ramp of "
            f"{epochs} epochs, got {settings.snapshots}"
        )
    start, high = recipe.final_lr(), settings.lr or recipe.lr
    lrs = [start + (high - start) * t / ramp if t <= ramp else high for t in range(1, total + 1)]
    collect = {
        ramp + (k * (total - ramp)) // settings.snapshots for k in range(1, settings.snapshots + 1)
    }
    return lrs, collect


def fit_swag(
    problem: Problem, mode: Mode, settings: Swag, seed: int
) -> tuple[nn.Module, SwagMoments]:
    """Continue SGD from `mode` and collect the SWAG moments; returns the model (at the last
    iterate) and the moments of its flattened parameters."""
    device = torch.device(problem.device)
    recipe = problem.recipe
    model = problem.build(mode.state)
    model.train()
    params = list(model.parameters())
    dim = sum(p.numel() for p in params)
    moments = SwagMoments(
        dim, min(settings.rank, settings.snapshots), device, deviation_dtype=params[0].dtype
    )
    lrs, collect_at = schedule(settings, recipe, math.ceil(len(problem.train) / recipe.batch_size))
    optimizer = torch.optim.SGD(
        params,
        lr=lrs[0],
        momentum=recipe.momentum,
        nesterov=recipe.nesterov,
        weight_decay=recipe.weight_decay,
    )
    batches = seed_batches(
        problem.train,
        recipe.batch_size,
        data_order_seed(mode.seed, seed),
        fit_epochs(settings, recipe),
        device,
        recipe.augment,
    )
    for step, (_, x, y) in enumerate(batches, start=1):
        for group in optimizer.param_groups:
            group["lr"] = lrs[step - 1]
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step in collect_at:
            moments.collect(torch.cat([p.detach().reshape(-1) for p in params]))
    check_finite(moments, lrs[-1])
    return model, moments


def check_finite(moments: SwagMoments, lr: float) -> None:
    if not torch.isfinite(moments.mean).all():
        raise RuntimeError(f"{NAME}: SGD diverged (non-finite weights); lower lr (now {lr})")


def fit_swag_batched(
    problem: Problem,
    modes: list[Mode],
    settings: Swag,
    seeds: list[int],
    chunk: int | None = None,
    progress: bool = False,
) -> list[tuple[nn.Module, SwagMoments]]:
    """`fit_swag` at every mode (with its seed) in one batched run (the model needs a
    hand-written pass): per mode, the model at its last iterate and its moments."""
    device = torch.device(problem.device)
    recipe = problem.recipe
    template = problem.build()
    dim = sum(p.numel() for p in template.parameters())
    per_epoch = math.ceil(len(problem.train) / recipe.batch_size)
    lrs, collect_at = schedule(settings, recipe, per_epoch)
    rank = min(settings.rank, settings.snapshots)
    moments = [SwagMoments(dim, rank, device, deviation_dtype=torch.float32) for _ in modes]

    def collect(step: Step, models: range, params: FlatStack) -> None:
        if step.number in collect_at:
            for row, vector in zip(models, params.packed()):
                moments[row].collect(vector)

    names = [name for name, _ in template.named_parameters()]
    params, _, _ = train_batched(
        problem.model_spec,
        recipe,
        problem.train,
        [data_order_seed(mode.seed, seed) for mode, seed in zip(modes, seeds, strict=True)],
        device,
        progress,
        chunk,
        initial=stacked_states(modes, names),
        lr=lambda step: lrs[step.number - 1],
        on_step=collect,
        steps=len(lrs),
        desc="fit swag",
    )
    for m in moments:
        check_finite(m, lrs[-1])
    return [(problem.build(unstack(params, k)), moments[k]) for k in range(len(modes))]


def fit_modes(
    problem: Problem,
    modes: list[Mode],
    settings: Swag,
    seeds: list[int],
    counts: list[int | None],
) -> list[Fitted]:
    """The SWAG moments at each mode and the network at its last SGD iterate (its
    buffers)."""
    if fits_in_batch(problem):
        fitted = fit_swag_batched(problem, modes, settings, seeds, progress=True)
    else:
        fitted = [fit_swag(problem, m, settings, s) for m, s in zip(modes, seeds, strict=True)]
    return [
        {
            "state": {name: t.detach().cpu() for name, t in model.state_dict().items()},
            "moments": moments.to_dict(),
        }
        for model, moments in fitted
    ]


def sample(
    problem: Problem, fitted: Fitted, count: int, settings: Swag, seed: int
) -> dict[str, torch.Tensor]:
    """`count` SWAG samples as a stacked CPU state dict name -> (count, *shape)."""
    count = check_count(NAME, count)
    device = torch.device(problem.device)
    model = problem.build(fitted["state"])
    model.train()  # as SGD left it: a BatchNorm refresh runs in train mode
    moments = SwagMoments.from_dict(fitted["moments"], device)
    params = list(model.parameters())
    sizes = [p.numel() for p in params]
    refresh = settings.bn_update and bool(batchnorm_layers(model))
    gen = generator(seed, device)
    out: dict[str, list[torch.Tensor]] = {name: [] for name in model.state_dict()}
    for _ in range(count):  # one at a time: a draw and its BatchNorm refresh
        theta = moments.sample(1, gen, settings.scale)[0]
        with torch.no_grad():
            for p, chunk in zip(params, theta.split(sizes)):
                p.copy_(chunk.view_as(p))
        if refresh:
            refresh_batchnorm(
                model, training_inputs(problem.train, problem.recipe.batch_size, device)
            )
        for name, tensor in model.state_dict().items():
            out[name].append(tensor.detach().to("cpu", copy=True))
    return {name: torch.stack(tensors) for name, tensors in out.items()}
