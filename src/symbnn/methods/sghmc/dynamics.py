"""The two SGHMC samplers on plain tensors: any potential, any shape. The network chain
(`symbnn.methods.sghmc.fit`) and the tests drive the same code with a gradient.

Both are the momentum form of Chen et al. (2014, eq. 15), element by element,

    v     <- (1 - a) v - eta * grad U~(theta) + sqrt(q) * xi,      xi ~ N(0, I),
    theta <- theta + v,

with friction a, step eta and injected noise variance q (`momentum_update`, which takes
sqrt(q)):

- momentum (`sghmc_step`): scalars eta = lr, q = 2 a eta T (gradient-noise estimate 0,
  temperature T);
- scale adapted (`ScaleAdaptedSghmc`, Springenberg et al. 2016, as the paper's reference code
  H_SA_SGHMC runs it): eta = lr^2 m per element with the preconditioner
  m = 1 / (sqrt(V^) + eps) from running gradient estimates adapted during burn-in
  (`ScaleEstimates`), q = max(2 a eta - lr^4, 1e-16) (lr^4 estimates the noise the minibatch
  gradient already brings: lr^4 V^-1 Var(grad) ~ lr^4 when the gradient is noise-dominated),
  the velocity redrawn from N(0, eta) every few steps, and the Gaussian prior's precision per
  tensor Gibbs-sampled from its Gamma conditional (`GaussianPrior`).

U~ is the potential: minus the log-likelihood, estimated on a minibatch, plus the prior's
(lambda_k / 2) ||theta_k||^2 for each tensor k. Callers give the likelihood part's gradient;
the sampler adds the prior's with its current precisions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

EPS = 1e-6  # the reference's guard in 1 / (tau + eps), g^2 / (V^ + eps), 1 / (sqrt(V^) + eps)
NOISE_FLOOR = 1e-16  # the reference's floor on the injected noise variance

Scale = float | torch.Tensor  # a scalar, or one value per element


def momentum_update(
    theta: torch.Tensor,
    velocity: torch.Tensor,
    grad: torch.Tensor,
    step: Scale,
    friction: float,
    noise_std: Scale,
    gen: torch.Generator | None,
) -> None:
    """v <- (1 - friction) v - step * grad + noise_std * xi;  theta <- theta + v, in place.
    `step` and `noise_std` are scalars or tensors of theta's shape; a zero scalar `noise_std`
    draws no noise."""
    velocity.mul_(1.0 - friction)
    if isinstance(step, torch.Tensor):
        velocity.addcmul_(grad, step, value=-1.0)
    else:
        velocity.sub_(grad, alpha=step)
    if isinstance(noise_std, torch.Tensor) or noise_std > 0:
        noise = torch.randn(theta.shape, generator=gen, device=theta.device, dtype=theta.dtype)
        if isinstance(noise_std, torch.Tensor):
            velocity.addcmul_(noise, noise_std)
        else:
            velocity.add_(noise, alpha=noise_std)
    theta.add_(velocity)


def sghmc_step(
    theta: torch.Tensor,
    velocity: torch.Tensor,
    grad: torch.Tensor,
    lr: float,
    friction: float,
    temperature: float,
    gen: torch.Generator | None,
) -> None:
    """One momentum-form SGHMC update, in place, on tensors of any (equal) shape:
    v <- (1 - friction) v - lr grad + sqrt(2 friction lr temperature) xi;  theta <- theta + v.
    `grad` is the (stochastic) gradient of U at the current theta."""
    noise_std = math.sqrt(2.0 * friction * lr * temperature)
    momentum_update(theta, velocity, grad, lr, friction, noise_std, gen)


@dataclass(frozen=True)
class GammaHyperprior:
    """lambda_k ~ Gamma(shape, rate) for each tensor's prior precision, redrawn from its
    conditional every `every` steps (the first step draws)."""

    shape: float
    rate: float
    every: int


class GaussianPrior:
    """theta_k ~ N(0, I / lambda_k) for each tensor k of theta (consecutive segments of
    `sizes` elements): lambda_k fixed at `precision`, or with a hyperprior Gibbs-sampled from

        lambda_k | theta ~ Gamma(shape + n_k / 2, rate + ||theta_k||^2 / 2)

    (the conditional of the Normal-Gamma model), using the numpy generator `rng`."""

    def __init__(
        self,
        sizes: Sequence[int],
        precision: float = 0.0,
        hyperprior: GammaHyperprior | None = None,
        rng: np.random.Generator | None = None,
    ) -> None:
        if hyperprior is not None and rng is None:
            raise ValueError("a Gamma hyperprior needs a random generator")
        self.sizes = np.asarray(sizes, dtype=np.float64)
        self.hyperprior = hyperprior
        self.rng = rng
        # per tensor; with a hyperprior, drawn at the first step
        self.precisions = np.full(len(self.sizes), float(precision))
        self._precision: Scale = float(precision)
        self._segments: torch.Tensor | None = None

    def refresh(self, theta: torch.Tensor, step: int) -> None:
        """The Gibbs draw of every tensor's precision at 1-based step `step`, when due."""
        if self.hyperprior is None or (step - 1) % self.hyperprior.every:
            return
        if self._segments is None:
            counts = torch.as_tensor(self.sizes, dtype=torch.long, device=theta.device)
            self._segments = torch.repeat_interleave(
                torch.arange(len(counts), device=theta.device), counts
            )
        squares = torch.zeros(len(self.sizes), dtype=torch.float64, device=theta.device)
        squares.index_add_(0, self._segments, theta.detach().double().square())
        shape = self.hyperprior.shape + self.sizes / 2
        rate = self.hyperprior.rate + squares.cpu().numpy() / 2
        self.precisions = self.rng.gamma(shape, 1.0 / rate)
        per_tensor = torch.as_tensor(self.precisions, dtype=theta.dtype, device=theta.device)
        self._precision = per_tensor[self._segments]

    def add_gradient(self, grad: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """grad + lambda theta (the prior's part of grad U), in place on `grad`."""
        if isinstance(self._precision, torch.Tensor):
            return grad.addcmul_(self._precision, theta)
        if self._precision > 0:
            grad.add_(theta, alpha=self._precision)
        return grad


class Sampler:
    """What both samplers hold: theta (moved in place), its prior, the step size, friction and
    noise generator, the velocity (0 at the start) and the steps taken."""

    def __init__(
        self,
        theta: torch.Tensor,
        prior: GaussianPrior,
        lr: float,
        friction: float,
        gen: torch.Generator | None,
    ) -> None:
        self.theta, self.prior, self.gen = theta, prior, gen
        self.lr, self.friction = lr, friction
        self.velocity = torch.zeros_like(theta)
        self.steps = 0


class MomentumSghmc(Sampler):
    """Chen et al.'s momentum form at temperature `temperature`; the velocity is never
    redrawn."""

    def __init__(self, *args, temperature: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.temperature = temperature

    def step(self, likelihood_grad: torch.Tensor) -> None:
        """One update; `likelihood_grad` (consumed) is the gradient of minus the
        log-likelihood at theta."""
        self.steps += 1
        grad = self.prior.add_gradient(likelihood_grad, self.theta)
        sghmc_step(
            self.theta, self.velocity, grad, self.lr, self.friction, self.temperature, self.gen
        )


@dataclass
class ScaleEstimates:
    """Per-element running estimates of the scale-adapted sampler, all starting at 1 as in the
    reference: the averaging window tau, the gradient's mean g and its mean square V^
    (Springenberg et al. 2016, eqs. 8-9)."""

    window: torch.Tensor
    mean: torch.Tensor
    square: torch.Tensor

    @classmethod
    def start(cls, like: torch.Tensor) -> ScaleEstimates:
        return cls(torch.ones_like(like), torch.ones_like(like), torch.ones_like(like))

    def adapt(self, grad: torch.Tensor) -> None:
        """One burn-in update: tau <- tau - tau g^2 / (V^ + eps) + 1 (the window grows while
        the gradient's mean is small against its spread), then g and V^ move towards grad
        and grad^2 by 1 / (tau + eps)."""
        self.window.sub_(self.window * self.mean.square() / (self.square + EPS)).add_(1.0)
        weight = 1.0 / (self.window + EPS)
        self.mean.addcmul_(weight, grad - self.mean)
        self.square.addcmul_(weight, grad.square() - self.square)

    def preconditioner(self) -> torch.Tensor:
        """m = 1 / (sqrt(V^) + eps)."""
        return 1.0 / (self.square.sqrt() + EPS)


class ScaleAdaptedSghmc(Sampler):
    """The scale-adapted sampler. Each step, in the reference's order: the prior's Gibbs draw
    when due; grad = likelihood gradient + lambda theta; during the first `burn_in_steps`
    steps the estimates adapt to grad; eta = lr^2 m; the velocity is redrawn from N(0, eta)
    every `momentum_every` steps (the first step draws); then the momentum update with
    friction `friction` and noise max(2 friction eta - lr^4, 1e-16). After burn-in the
    estimates stay fixed."""

    def __init__(self, *args, burn_in_steps: int, momentum_every: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.burn_in_steps, self.momentum_every = burn_in_steps, momentum_every
        self.scales = ScaleEstimates.start(self.theta)
        self._frozen: tuple[torch.Tensor, torch.Tensor] | None = None  # after burn-in

    def step(self, likelihood_grad: torch.Tensor) -> None:
        """One update; `likelihood_grad` (consumed) is the gradient of minus the
        log-likelihood at theta."""
        self.steps += 1
        self.prior.refresh(self.theta, self.steps)
        grad = self.prior.add_gradient(likelihood_grad, self.theta)
        adapting = self.steps <= self.burn_in_steps
        if adapting:
            self.scales.adapt(grad)
        eta, noise_std = self._frozen or self._step_and_noise()
        if not adapting:
            self._frozen = (eta, noise_std)  # the estimates no longer move
        if (self.steps - 1) % self.momentum_every == 0:
            noise = torch.randn(
                self.theta.shape, generator=self.gen, device=self.theta.device, dtype=eta.dtype
            )
            self.velocity = noise.mul_(eta.sqrt())
        momentum_update(self.theta, self.velocity, grad, eta, self.friction, noise_std, self.gen)

    def _step_and_noise(self) -> tuple[torch.Tensor, torch.Tensor]:
        """eta = lr^2 m and the noise's standard deviation sqrt(max(2 a eta - lr^4, 1e-16))."""
        eta = self.scales.preconditioner().mul_(self.lr**2)
        noise_var = (2.0 * self.friction * eta - self.lr**4).clamp_(min=NOISE_FLOOR)
        return eta, noise_var.sqrt_()
