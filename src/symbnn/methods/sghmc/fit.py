"""Stochastic-gradient Hamiltonian Monte Carlo (SGHMC) chains, started from a trained mode.

Two samplers (`symbnn.methods.sghmc.dynamics` has them on plain tensors, docs/maths.md 4.4):

- `scale_adapted` (default): the paper's reference code, H_SA_SGHMC of the
  "Bayesian-Neural-Networks" repository (Springenberg et al. 2016): a per-element
  preconditioner from gradient estimates adapted during burn-in, the prior precision of each
  parameter tensor Gibbs-sampled under a Gamma hyperprior, the velocity redrawn periodically;
- `momentum`: Chen et al. (2014, eq. 15) with the gradient-noise estimate 0 and a temperature.

Target. With N = len(train) training pairs, the potential is

    U(theta) = sum_i CE(f_theta(x_i), y_i) + sum_k lambda_k / 2 * ||theta_k||^2

over the parameter tensors theta_k (BatchNorm running statistics are buffers, not
parameters), estimated on a minibatch B as the reference does: N * mean_{i in B} CE plus the
prior term. The precisions lambda_k are Gibbs-sampled (scale_adapted with its hyperprior) or
fixed at N * weight_decay (the prior as a weight decay on the mean loss; default the recipe's).

Momentum settings are per example, as an SGD recipe is: `lr` is the SGD rate on the mean
loss, so the step on the summed potential is lr / N (default the recipe's last rate). The
scale-adapted sampler needs no such scaling: its preconditioner 1 / sqrt(V^) absorbs N.

Chain. theta starts at the mode. The schedule is in epochs of the chain's minibatches:
`burn_in_epochs`, then one sample every `sample_every_epochs` until `count` are collected;
`epochs` bounds the chain, so it holds at most (epochs - burn-in) / spacing samples. Unset,
the three follow the reference's MNIST chain (250, 20, 2 epochs) in proportion to the recipe's
epochs (the paper's OptuNet recipe has 60). Minibatches follow `seed_batches` with a
data-order seed derived from (mode.seed, seed) and the recipe's augmentation; the injected
noise and velocity draws come from a torch generator seeded with `seed`, the Gamma draws from
a numpy generator derived from it. Forward passes run in train mode, so BatchNorm running
statistics keep tracking the chain and each sample stores the buffers current at that step.

The chains of a block of modes run together in the batched trainer where it has a
hand-written pass for the model (`chains_batched`: the stacked pass gives every chain's
minibatch gradient, and each chain's own sampler moves it), else one by one with
`functional_call` and autograd (`chain`, the reference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import functional_call
from torch.nn import functional as F

from symbnn.methods.base import (
    Fitted,
    Mode,
    Problem,
    check_count,
    fits_in_batch,
    fitted_samples,
    generator,
    stacked_states,
)
from symbnn.methods.base import data_order_seed as base_data_order_seed
from symbnn.methods.sghmc.dynamics import (
    GammaHyperprior,
    GaussianPrior,
    MomentumSghmc,
    ScaleAdaptedSghmc,
)
from symbnn.methods.sghmc.dynamics import sghmc_step as sghmc_step  # the momentum core
from symbnn.settings import Recipe, Sghmc
from symbnn.train.batched import train_batched
from symbnn.train.flat import FlatStack
from symbnn.train.loop import seed_batches
from symbnn.train.stepping import Step

NAME = "sghmc"

_DATA_ORDER_TAG = 0x5347  # "SG": separates this method's data-order seeds from others'
_GAMMA_TAG = 0x4741  # "GA": the hyperprior's numpy stream, apart from the torch noise


def prior_precision(settings: Sghmc, recipe: Recipe, n_train: int) -> float:
    """The fixed prior precision: N * weight decay (the setting's, or the recipe's)."""
    decay = settings.weight_decay if settings.weight_decay is not None else recipe.weight_decay
    return n_train * decay


def scaled(settings: Sghmc, recipe: Recipe, n_train: int) -> tuple[float, float]:
    """Momentum variant: (SGD-equivalent lr on the mean loss, prior precision N * weight decay)."""
    lr = settings.lr if settings.lr is not None else recipe.final_lr()
    return lr, prior_precision(settings, recipe, n_train)


@dataclass(frozen=True)
class Schedule:
    """A chain's schedule in steps of `batch_size` pairs: burn-in, steps between samples, and
    the length that bounds it; `epochs` keeps the three in epochs for messages."""

    batch_size: int
    steps_per_epoch: int
    burn_in: int
    spacing: int
    length: int
    epochs: tuple[float, float, float]

    @property
    def capacity(self) -> int:
        """The samples the chain holds."""
        return max(0, (self.length - self.burn_in) // self.spacing)

    def is_sample(self, step: int) -> bool:
        return step > self.burn_in and (step - self.burn_in) % self.spacing == 0

    def check(self, count: int) -> None:
        if count > self.capacity:
            length, burn_in, every = self.epochs
            raise ValueError(
                f"{NAME}: {count} samples asked for, but a chain of {length:g} epochs with "
                f"{burn_in:g} burn-in epochs and one sample every {every:g} epochs "
                f"({self.spacing} steps) holds {self.capacity}; raise sghmc.epochs or lower "
                "sghmc.sample_every_epochs"
            )


def schedule(settings: Sghmc, recipe: Recipe, n_train: int) -> Schedule:
    """The chain's schedule for a training set of `n_train` pairs."""
    batch = settings.batch_size if settings.batch_size is not None else recipe.batch_size
    per_epoch = math.ceil(n_train / batch)
    length, burn_in, every = settings.chain_epochs(recipe.epochs)
    return Schedule(
        batch,
        per_epoch,
        round(burn_in * per_epoch),
        max(1, round(every * per_epoch)),
        round(length * per_epoch),
        (length, burn_in, every),
    )


def data_order_seed(mode_seed: int, seed: int) -> int:
    """The `seed_batches` seed of a chain: a deterministic function of (mode seed, seed)."""
    return base_data_order_seed(mode_seed, seed, _DATA_ORDER_TAG)


def fit_modes(
    problem: Problem,
    modes: list[Mode],
    settings: Sghmc,
    seeds: list[int],
    counts: list[int | None],
) -> list[Fitted]:
    """The chain from each mode (with its seed): its `count` samples."""
    if fits_in_batch(problem):
        chains = chains_batched(problem, modes, counts, settings, seeds, progress=True)
    else:
        chains = [
            chain(problem, m, c, settings, s) for m, c, s in zip(modes, counts, seeds, strict=True)
        ]
    return [{"samples": samples} for samples in chains]


def sample(
    problem: Problem, fitted: Fitted, count: int, settings: Sghmc, seed: int
) -> dict[str, torch.Tensor]:
    """The chain's samples, as `fit` drew them."""
    return fitted_samples(NAME, fitted, count)


def sampler(
    settings: Sghmc,
    theta: torch.Tensor,
    sizes: list[int],
    problem: Problem,
    burn_in_steps: int,
    seed: int,
) -> MomentumSghmc | ScaleAdaptedSghmc:
    """The variant's sampler, moving `theta` (the parameters, flattened) in place."""
    n_train = len(problem.train)
    gen = generator(seed, theta.device)
    if settings.variant == "momentum":
        lr, precision = scaled(settings, problem.recipe, n_train)
        prior = GaussianPrior(sizes, precision)
        friction = settings.variant_default("friction")
        return MomentumSghmc(
            theta, prior, lr / n_train, friction, gen, temperature=settings.temperature
        )
    if settings.hyperprior:
        rng = np.random.default_rng([int(seed), _GAMMA_TAG])
        hyperprior = GammaHyperprior(settings.alpha0, settings.beta0, settings.prior_resample_steps)
        prior = GaussianPrior(sizes, hyperprior=hyperprior, rng=rng)
    else:
        prior = GaussianPrior(sizes, prior_precision(settings, problem.recipe, n_train))
    return ScaleAdaptedSghmc(
        theta,
        prior,
        settings.variant_default("lr"),
        settings.variant_default("friction"),
        gen,
        burn_in_steps=burn_in_steps,
        momentum_every=settings.momentum_resample_steps,
    )


def chain(
    problem: Problem, mode: Mode, count: int, settings: Sghmc, seed: int
) -> dict[str, torch.Tensor]:
    """`count` SGHMC samples around `mode` as a stacked CPU state dict name -> (count, *shape)."""
    count = check_count(NAME, count)
    device = torch.device(problem.device)
    model = problem.build(mode.state)
    model.train()

    names, shapes, sizes = [], [], []
    for name, p in model.named_parameters():
        names.append(name)
        shapes.append(p.shape)
        sizes.append(p.numel())
    theta = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()
    n_train = len(problem.train)
    plan = schedule(settings, problem.recipe, n_train)
    plan.check(count)
    moves = sampler(settings, theta, sizes, problem, plan.burn_in, seed)

    def likelihood_grad(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Gradient of N * mean minibatch cross-entropy (the reference's estimate)."""
        leaf = theta.detach().requires_grad_(True)
        params = {n: t.view(s) for n, t, s in zip(names, leaf.split(sizes), shapes)}
        loss = F.cross_entropy(functional_call(model, params, (x,)), y)
        (grad,) = torch.autograd.grad(loss, leaf)
        return grad.mul_(n_train)

    def snapshot() -> dict[str, torch.Tensor]:
        return state_of(theta, moves, settings, names, shapes, model.state_dict())

    epochs = math.ceil((plan.burn_in + count * plan.spacing) / plan.steps_per_epoch)
    batches = seed_batches(
        problem.train,
        plan.batch_size,
        data_order_seed(mode.seed, seed),
        epochs,
        device,
        problem.recipe.augment,
    )
    samples: list[dict[str, torch.Tensor]] = []
    for step, (_, x, y) in enumerate(batches, start=1):
        moves.step(likelihood_grad(x, y))
        if plan.is_sample(step):
            samples.append(snapshot())
            if len(samples) == count:
                break
    assert len(samples) == count
    return {name: torch.stack([s[name] for s in samples]) for name in samples[0]}


def state_of(
    theta: torch.Tensor,
    moves: MomentumSghmc | ScaleAdaptedSghmc,
    settings: Sghmc,
    names: list[str],
    shapes: list[torch.Size],
    state: dict[str, torch.Tensor],
) -> dict[str, torch.Tensor]:
    """A sample: the model's `state` with the parameters `names` from the flat `theta`, a CPU
    copy; raises if the chain has diverged."""
    if not torch.isfinite(theta).all():
        raise RuntimeError(
            f"{NAME}: the {settings.variant} chain diverged (non-finite weights); lower lr "
            f"(now {moves.lr}) or raise friction (now {moves.friction})"
        )
    sizes = [math.prod(shape) for shape in shapes]
    views = dict(zip(names, (t.view(s) for t, s in zip(theta.split(sizes), shapes))))
    return {
        name: views.get(name, tensor).detach().to("cpu", copy=True)
        for name, tensor in state.items()
    }


def chains_batched(
    problem: Problem,
    modes: list[Mode],
    counts: list[int],
    settings: Sghmc,
    seeds: list[int],
    chunk: int | None = None,
    progress: bool = False,
) -> list[dict[str, torch.Tensor]]:
    """`chain` from every mode (with its count and seed) in one batched run (the model needs
    a hand-written pass): the stacked pass gives each chain's minibatch gradient, each
    chain's own sampler moves it. Per mode, its samples."""
    counts = [check_count(NAME, c) for c in counts]
    device = torch.device(problem.device)
    template = problem.build()
    names = [name for name, _ in template.named_parameters()]
    shapes = [p.shape for _, p in template.named_parameters()]
    sizes = [p.numel() for p in template.parameters()]
    n_train = len(problem.train)
    plan = schedule(settings, problem.recipe, n_train)
    for count in counts:
        plan.check(count)
    # the chains' parameters, flat and unpadded (a row per chain, each row its sampler's theta)
    thetas = torch.stack(
        [torch.cat([mode.state[name].reshape(-1) for name in names]) for mode in modes]
    ).to(device, torch.float32)
    moves = [
        sampler(settings, thetas[k], sizes, problem, plan.burn_in, seed)
        for k, seed in enumerate(seeds)
    ]
    samples: list[list[dict[str, torch.Tensor]]] = [[] for _ in modes]
    state = template.state_dict()

    def update(step: Step, models: range, params: FlatStack, grads: FlatStack) -> None:
        likelihood = grads.packed().mul_(n_train)  # of N * mean minibatch cross-entropy
        for row, grad in zip(models, likelihood):
            moves[row].step(grad)
        params.unpack_(thetas[models.start : models.stop])
        if plan.is_sample(step.number):
            for row in models:
                if len(samples[row]) < counts[row]:
                    samples[row].append(
                        state_of(thetas[row], moves[row], settings, names, shapes, state)
                    )

    train_batched(
        problem.model_spec,
        problem.recipe.replace(batch_size=plan.batch_size),
        problem.train,
        [data_order_seed(mode.seed, seed) for mode, seed in zip(modes, seeds, strict=True)],
        device,
        progress,
        chunk,
        initial=stacked_states(modes, names),
        update=update,
        steps=plan.burn_in + max(counts) * plan.spacing,
        desc="fit sghmc",
    )
    return [{name: torch.stack([s[name] for s in chain]) for name in state} for chain in samples]
