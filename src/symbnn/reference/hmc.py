"""Full-batch Hamiltonian Monte Carlo for a batch of independent chains (docs/maths.md 4.7).

The target is exp(-U(theta)); a `Potential` maps the chains' positions (k, D) in float64 to
each chain's U (k,) and its gradient (k, D), both float64. With the momentum p ~ N(0, I),
H(theta, p) = U(theta) + |p|^2 / 2, and one iteration of a chain is

- draw p from the chain's generator, then a uniform u and a uniform v (all three every
  iteration);
- `leapfrog`: `steps` leapfrog steps of size eps (1 + j (2 v - 1)) from (theta, p), the step
  size jittered by up to a fraction j (`step_jitter`) so that no trajectory length stays
  near a period of the dynamics (Neal 2011, section 5.4.2.2; a Gaussian target otherwise
  mixes slowly, or not at all, along a direction whose period the trajectory matches);
- Metropolis: accept the end point when log u < -(H_new - H_old), else stay.

During the `burn_in` iterations each chain's eps is adapted by dual averaging toward the
acceptance probability `target_accept` (`symbnn.reference.adaptation`), then frozen at the
averaged value for the `draws` kept iterations.

Why a chain is bit for bit the same alone or in any batch: its random draws come from its
own generator, seeded from its seed alone; every tensor operation here is a product, a sum
or a selection of elements, or a sum along a chain's own row: an update such as
theta + eps * p is a product then a sum (two roundings), never a fused multiply-add whose use
could depend on where an element falls in a vectorised loop. The per-chain scalars that need
exp or log (the Metropolis test, the dual averaging) are computed chain by chain with `math`,
whose results cannot depend on a vector loop either. The potential must keep a chain's numbers
to its own row too (the network's does: `symbnn.reference.network`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from symbnn.reference.adaptation import DualAveraging, log_accept, reasonable_step_sizes
from symbnn.settings.hmc import Reference

REFERENCE = Reference()  # the configuration's defaults, declared once in the settings layer

# positions (k, D) float64 -> (U (k,), grad U (k, D)), both float64
Potential = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]

_STREAM_TAG = 0x484D43  # "HMC": separates the chains' streams from other users of a seed


@dataclass(frozen=True)
class HmcSettings:
    """`burn_in` adapting iterations, then `draws` kept ones, each a trajectory of
    `leapfrog_steps`; `step_size` the initial step size (None: found per chain by doubling
    or halving from `search_start`); `target_accept` the dual averaging's target;
    `step_jitter` the fraction by which each trajectory's step size is drawn around it."""

    burn_in: int = 20
    draws: int = REFERENCE.draws
    leapfrog_steps: int = REFERENCE.leapfrog_steps
    target_accept: float = REFERENCE.target_accept
    step_size: float | None = None
    search_start: float = 1e-3
    step_jitter: float = 0.1

    def __post_init__(self) -> None:
        checks = {
            "burn_in": self.burn_in >= 0,
            "draws": self.draws >= 1,
            "leapfrog_steps": self.leapfrog_steps >= 1,
            "target_accept": 0.0 < self.target_accept < 1.0,
            "step_size": self.step_size is None or self.step_size > 0,
            "search_start": self.search_start > 0,
            "step_jitter": 0.0 <= self.step_jitter < 1.0,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"hmc setting {name} = {getattr(self, name)!r} is out of range")


@dataclass
class HmcRun:
    """What the chains produced. `samples` (K, draws, D) float64 are the kept positions;
    per kept sample (K, draws): `step` (the iteration, from 1, burn-in counted), `accepted`,
    `accept_prob` (min(1, exp(-dH))), `energy_error` (H_new - H_old of the proposal) and
    `step_size`; per burn-in iteration (K, burn_in): `warmup_accept_prob` and
    `warmup_step_size`. Row k is the chain of `seeds[k]`."""

    samples: torch.Tensor
    seeds: np.ndarray
    step: np.ndarray
    accepted: np.ndarray
    accept_prob: np.ndarray
    energy_error: np.ndarray
    step_size: np.ndarray
    warmup_accept_prob: np.ndarray
    warmup_step_size: np.ndarray

    def records(self) -> dict[str, np.ndarray]:
        """One row per kept sample, chain after chain: chain (index), seed, step, accepted,
        accept_prob, energy_error, step_size."""
        k, draws = self.step.shape
        return {
            "chain": np.repeat(np.arange(k), draws),
            "seed": np.repeat(self.seeds, draws),
            "step": self.step.reshape(-1),
            "accepted": self.accepted.reshape(-1),
            "accept_prob": self.accept_prob.reshape(-1),
            "energy_error": self.energy_error.reshape(-1),
            "step_size": self.step_size.reshape(-1),
        }


def chain_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The generator of the chain `seed`: its momenta and its Metropolis uniforms."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"chain seeds must be non-negative integers, got {seed!r}")
    entropy = np.random.SeedSequence([int(seed), _STREAM_TAG])
    state = int(entropy.generate_state(1, dtype=np.uint64)[0]) >> 1  # manual_seed takes < 2**63
    return torch.Generator(device=device).manual_seed(state)


def kinetic(momentum: torch.Tensor) -> torch.Tensor:
    """|p|^2 / 2 per chain, in float64."""
    return (momentum * momentum).sum(1) * 0.5


def leapfrog(
    potential: Potential,
    theta: torch.Tensor,
    momentum: torch.Tensor,
    grad: torch.Tensor,
    step_size: torch.Tensor,
    steps: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`steps` leapfrog steps of per-chain sizes `step_size` (k,) from (theta, momentum), with
    `grad` the gradient at theta: (theta, momentum, U, grad U) at the end. New tensors; the
    arguments are left as they were."""
    eps = step_size.view(-1, 1)
    half = eps * 0.5
    p = momentum - half * grad
    u = None
    for i in range(steps):
        theta = theta + eps * p
        u, grad = potential(theta)
        p = p - (eps if i < steps - 1 else half) * grad
    return theta, p, u, grad


def _draws(generators: Sequence[torch.Generator], dim: int, device) -> tuple[torch.Tensor, ...]:
    """Each chain's momentum (k, D) and two uniforms (k, 2) (the Metropolis test's, the
    step size jitter's), drawn from its own generator."""
    momenta, uniforms = [], []
    for gen in generators:
        momenta.append(torch.randn(dim, generator=gen, dtype=torch.float64, device=gen.device))
        uniforms.append(torch.rand(2, generator=gen, dtype=torch.float64, device=gen.device))
    return torch.stack(momenta).to(device), torch.stack(uniforms).to(device)


def _initial_steps(
    potential: Potential,
    theta: torch.Tensor,
    u: torch.Tensor,
    grad: torch.Tensor,
    generators: Sequence[torch.Generator],
    settings: HmcSettings,
) -> list[float]:
    """Each chain's first step size: the setting's, or the search's from one momentum draw."""
    k, dim = theta.shape
    if settings.step_size is not None:
        return [float(settings.step_size)] * k
    momentum, _ = _draws(generators, dim, theta.device)
    h0 = u + kinetic(momentum)

    def energy_change(steps: list[float]) -> list[float]:
        sizes = torch.tensor(steps, dtype=torch.float64, device=theta.device)
        _, p, u1, _ = leapfrog(potential, theta, momentum, grad, sizes, 1)
        return ((u1 + kinetic(p)) - h0).tolist()

    return reasonable_step_sizes(energy_change, settings.search_start, k)


def _metropolis(errors: list[float], uniforms: list[float]) -> tuple[list[bool], list[float]]:
    """Per chain: accepted (log u < -dH, never for a non-finite dH) and min(1, exp(-dH))."""
    accepted, probs = [], []
    for error, u in zip(errors, uniforms, strict=True):
        log_u = math.log(u) if u > 0 else -math.inf
        accepted.append(math.isfinite(error) and log_u < -error)
        probs.append(math.exp(log_accept(error)))
    return accepted, probs


def run_chains(
    potential: Potential,
    initial: torch.Tensor,
    seeds: Sequence[int],
    settings: HmcSettings,
    on_iteration: Callable[[int], None] | None = None,
) -> HmcRun:
    """Run one chain per seed from the positions `initial` (K, D) (cast to float64) under
    `potential`. `on_iteration(i)` is called after each iteration (progress)."""
    theta = initial.to(torch.float64).clone()
    seeds = list(seeds)
    if theta.ndim != 2 or theta.shape[0] != len(seeds):
        raise ValueError(
            f"initial positions must be (chains, D) with one row per seed ({len(seeds)}), "
            f"got {tuple(theta.shape)}"
        )
    generators = [chain_generator(seed) for seed in seeds]
    k, device = len(seeds), theta.device
    u, grad = potential(theta)
    starts = _initial_steps(potential, theta, u, grad, generators, settings)
    adapt = [DualAveraging(start, settings.target_accept) for start in starts]
    total = settings.burn_in + settings.draws
    trace = {name: np.zeros((k, total)) for name in ("accept_prob", "energy_error", "step_size")}
    accepted = np.zeros((k, total), dtype=bool)
    samples = torch.empty(k, settings.draws, theta.shape[1], dtype=torch.float64)
    for i in range(total):
        adapting = i < settings.burn_in
        momentum, uniforms = _draws(generators, theta.shape[1], device)
        jitter = (uniforms[:, 1] * 2.0 - 1.0) * settings.step_jitter + 1.0
        base = [a.step_size if adapting else a.final for a in adapt]
        step = torch.tensor(base, dtype=torch.float64, device=device) * jitter
        new_theta, new_p, new_u, new_grad = leapfrog(
            potential, theta, momentum, grad, step, settings.leapfrog_steps
        )
        error = (new_u + kinetic(new_p)) - (u + kinetic(momentum))
        accept, prob = _metropolis(error.tolist(), uniforms[:, 0].tolist())
        mask = torch.tensor(accept, device=device)
        theta = torch.where(mask.view(-1, 1), new_theta, theta)
        grad = torch.where(mask.view(-1, 1), new_grad, grad)
        u = torch.where(mask, new_u, u)
        if adapting:
            for chain, p in zip(adapt, prob):
                chain.update(p)
        else:
            samples[:, i - settings.burn_in] = theta.cpu()
        trace["accept_prob"][:, i] = prob
        trace["energy_error"][:, i] = error.cpu().numpy()
        trace["step_size"][:, i] = step.cpu().numpy()
        accepted[:, i] = accept
        if on_iteration is not None:
            on_iteration(i)
    kept = slice(settings.burn_in, total)
    return HmcRun(
        samples=samples,
        seeds=np.asarray(seeds, dtype=np.int64),
        step=np.tile(np.arange(settings.burn_in + 1, total + 1), (k, 1)),
        accepted=accepted[:, kept],
        accept_prob=trace["accept_prob"][:, kept],
        energy_error=trace["energy_error"][:, kept],
        step_size=trace["step_size"][:, kept],
        warmup_accept_prob=trace["accept_prob"][:, : settings.burn_in],
        warmup_step_size=trace["step_size"][:, : settings.burn_in],
    )
