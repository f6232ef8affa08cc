"""Stochastic-gradient Hamiltonian Monte Carlo (SGHMC), started from a trained mode.

Reference: T. Chen, E. B. Fox, C. Guestrin, "Stochastic Gradient Hamiltonian Monte Carlo",
ICML 2014 (section 3.3 and equation (15), the "momentum" form of the sampler).

Target. With N = len(train) training pairs and a Gaussian prior of precision lambda, the
potential energy is

    U(theta) = sum_i CE(f_theta(x_i), y_i) + lambda / 2 * ||theta||^2,

the negative log posterior up to a constant (every parameter is in theta; BatchNorm running
statistics are buffers, not parameters). It is estimated on a minibatch B as

    U~(theta) = N * mean_{i in B} CE(f_theta(x_i), y_i) + lambda / 2 * ||theta||^2.

Dynamics. Chen et al. write SGHMC with mass M, step size epsilon and friction C; with the
substitutions v = epsilon M^{-1} r, eta = epsilon^2 M^{-1}, alpha = epsilon M^{-1} C their
equation (15) reads

    v     <- (1 - alpha) v - eta * grad U~(theta) + sqrt(2 (alpha - beta^) eta) * xi,
    theta <- theta + v,                                       xi ~ N(0, I).

Here the gradient-noise estimate beta^ is 0 (the paper's practical choice: for small eta
the minibatch noise, of variance O(eta^2), is dominated by the injected O(eta) noise), and
a temperature T scales the injected noise to target exp(-U / T):

    v     <- (1 - friction) v - eta * grad U~(theta) + sqrt(2 * friction * eta * T) * xi,
    theta <- theta + v.

`sghmc_step` is this update on plain tensors, usable on any potential; `friction` is
alpha = 1 - SGD momentum, and the chain behaves like heavy-ball SGD with calibrated noise.

Scaling with N. The settings are written per example, as an SGD recipe is, so that one
setting means the same chain on 4,000 or 60,000 images: `lr` is the SGD rate on the mean
loss, so eta = lr / N, and `weight_decay` is the prior as a weight decay on the mean loss, so
the prior precision is lambda = N * weight_decay. Both default to the experiment's recipe:
its last learning rate (where the modes ended) and its weight decay.

Chain. Velocity starts at 0 and theta at the mode. After `burn_in_epochs` epochs one sample
is kept every `thinning_steps` steps until `count` are collected (epochs are added as
needed). Minibatches follow `seed_batches` with a data-order seed derived from (mode.seed,
seed); the injected noise comes from a generator seeded with `seed`. Forward passes run in
train mode, so BatchNorm running statistics keep tracking the chain and each sample stores
the buffers current at that step.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.func import functional_call
from torch.nn import functional as F

from symbnn.methods.base import Fitted, Mode, Problem, check_count, fitted_samples, generator
from symbnn.settings import Recipe, Sghmc
from symbnn.train.loop import seed_batches

NAME = "sghmc"

_DATA_ORDER_TAG = 0x5347  # "SG": separates this method's data-order seeds from others'


def sghmc_step(
    theta: torch.Tensor,
    velocity: torch.Tensor,
    grad: torch.Tensor,
    lr: float,
    friction: float,
    temperature: float,
    gen: torch.Generator | None,
) -> None:
    """One SGHMC update, in place, on tensors of any (equal) shape:
    v <- (1 - friction) v - lr grad + sqrt(2 friction lr temperature) xi;  theta <- theta + v.
    `grad` is the (stochastic) gradient of U at the current theta."""
    velocity.mul_(1.0 - friction).sub_(grad, alpha=lr)
    if temperature > 0:
        noise = torch.randn(theta.shape, generator=gen, device=theta.device, dtype=theta.dtype)
        velocity.add_(noise, alpha=math.sqrt(2.0 * friction * lr * temperature))
    theta.add_(velocity)


def scaled(settings: Sghmc, recipe: Recipe, n_train: int) -> tuple[float, float]:
    """(SGD-equivalent lr on the mean loss, prior precision lambda = N * weight decay)."""
    lr = settings.lr if settings.lr is not None else recipe.final_lr()
    decay = settings.weight_decay if settings.weight_decay is not None else recipe.weight_decay
    return lr, n_train * decay


def data_order_seed(mode_seed: int, seed: int) -> int:
    """The `seed_batches` seed of a chain: a deterministic function of (mode seed, seed)."""
    state = np.random.SeedSequence([int(mode_seed), int(seed), _DATA_ORDER_TAG]).generate_state(
        1, np.uint64
    )[0]
    return int(state >> np.uint64(1))


def fit(problem: Problem, mode: Mode, settings: Sghmc, seed: int, count: int) -> Fitted:
    """The chain from `mode`: its `count` samples."""
    return {"samples": chain(problem, mode, count, settings, seed)}


def draw(
    problem: Problem, fitted: Fitted, count: int, settings: Sghmc, seed: int
) -> dict[str, torch.Tensor]:
    """The chain's samples, as `fit` drew them."""
    return fitted_samples(NAME, fitted, count)


def chain(
    problem: Problem, mode: Mode, count: int, cfg: Sghmc, seed: int
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
    dtype = next(model.parameters()).dtype
    theta = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()
    velocity = torch.zeros_like(theta)
    n_train = len(problem.train)
    lr, prior_precision = scaled(cfg, problem.recipe, n_train)
    noise_gen = generator(seed, device)

    def potential_grad(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        leaf = theta.detach().requires_grad_(True)
        params = {n: t.view(s) for n, t, s in zip(names, leaf.split(sizes), shapes)}
        loss = F.cross_entropy(functional_call(model, params, (x,)), y)
        (grad,) = torch.autograd.grad(loss, leaf)
        grad.mul_(n_train)
        if prior_precision > 0:
            grad.add_(theta, alpha=prior_precision)
        return grad

    def snapshot() -> dict[str, torch.Tensor]:
        if not torch.isfinite(theta).all():
            raise RuntimeError(
                f"{NAME}: the chain diverged (non-finite weights); lower lr "
                f"(now {lr}) or raise friction (now {cfg.friction})"
            )
        views = dict(zip(names, (t.view(s) for t, s in zip(theta.split(sizes), shapes))))
        return {
            name: views.get(name, tensor).detach().to("cpu", copy=True)
            for name, tensor in model.state_dict().items()
        }

    recipe = problem.recipe
    steps_per_epoch = math.ceil(n_train / recipe.batch_size)
    burn_in = cfg.burn_in_epochs * steps_per_epoch
    total = burn_in + count * cfg.thinning_steps
    epochs = math.ceil(total / steps_per_epoch)
    batches = seed_batches(
        problem.train,
        recipe.batch_size,
        data_order_seed(mode.seed, seed),
        epochs,
        device,
        recipe.augment,
    )
    samples: list[dict[str, torch.Tensor]] = []
    for step, (_, x, y) in enumerate(batches, start=1):
        grad = potential_grad(x, y)
        sghmc_step(theta, velocity, grad, lr / n_train, cfg.friction, cfg.temperature, noise_gen)
        if step > burn_in and (step - burn_in) % cfg.thinning_steps == 0:
            samples.append(snapshot())
            if len(samples) == count:
                break
    assert len(samples) == count and theta.dtype == dtype
    return {name: torch.stack([s[name] for s in samples]) for name in samples[0]}
