"""The HMC sampler on analytic targets: it samples a correlated Gaussian and a Bayesian
logistic regression (against quadrature), its leapfrog's energy error falls as the square of
the step size and runs back to its start with the momentum negated, dual averaging puts the
acceptance in its band, and a chain is bit for bit the same alone or in any batch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from symbnn.reference.adaptation import DualAveraging, reasonable_step_sizes
from symbnn.reference.diagnostics import ess_bulk
from symbnn.reference.hmc import HmcSettings, chain_generator, kinetic, leapfrog, run_chains

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Gaussian:
    """U = (theta - mean)' P (theta - mean) / 2, rows independent (elementwise products and
    row sums, no matmul whose rounding could depend on the batch)."""

    def __init__(self, mean: torch.Tensor, cov: torch.Tensor) -> None:
        self.mean, self.cov = mean, cov
        self.precision = torch.linalg.inv(cov)

    def __call__(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        centred = theta - self.mean
        grad = (centred.unsqueeze(1) * self.precision).sum(-1)
        return (centred * grad).sum(1) * 0.5, grad


def correlated_gaussian(dim: int, seed: int = 0) -> Gaussian:
    g = torch.Generator().manual_seed(seed)
    factor = torch.randn(dim, dim, generator=g, dtype=torch.float64)
    cov = factor @ factor.T / dim + torch.diag(torch.linspace(0.2, 2.0, dim, dtype=torch.float64))
    mean = torch.randn(dim, generator=g, dtype=torch.float64) * 3
    return Gaussian(mean, cov)


class Logistic:
    """Bayesian logistic regression in 2-D: y ~ Bernoulli(sigmoid(x . w)), w ~ N(0, I)."""

    def __init__(self, n: int = 40, seed: int = 1) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 2, generator=g, dtype=torch.float64)
        truth = torch.tensor([1.5, -1.0], dtype=torch.float64)
        self.y = torch.rand(n, generator=g, dtype=torch.float64) < torch.sigmoid(self.x @ truth)
        self.y = self.y.to(torch.float64)

    def __call__(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = (theta.unsqueeze(1) * self.x).sum(-1)  # (k, n)
        nll = (torch.nn.functional.softplus(logits) - self.y * logits).sum(1)
        residual = torch.sigmoid(logits) - self.y
        grad = (residual.unsqueeze(-1) * self.x).sum(1)
        return nll + (theta * theta).sum(1) * 0.5, grad + theta

    def quadrature_mean(self, points: int = 401, half_width: float = 6.0) -> np.ndarray:
        """The posterior mean by the trapezoid rule on a grid around the origin (the
        integrand is negligible beyond it)."""
        axis = torch.linspace(-half_width, half_width, points, dtype=torch.float64)
        w1, w2 = torch.meshgrid(axis, axis, indexing="ij")
        grid = torch.stack([w1.reshape(-1), w2.reshape(-1)], 1)
        logits = grid @ self.x.T
        nll = (torch.nn.functional.softplus(logits) - self.y * logits).sum(1)
        u = nll + (grid * grid).sum(1) * 0.5
        edge = torch.exp(-(u - u.min())).reshape(points, points)
        assert max(edge[0].max(), edge[-1].max(), edge[:, 0].max(), edge[:, -1].max()) < 1e-12
        density = torch.exp(-(u - u.min())).reshape(points, points).numpy()
        weights = np.trapezoid(np.trapezoid(density, axis.numpy(), axis=1), axis.numpy())
        means = [
            np.trapezoid(np.trapezoid(density * w.numpy(), axis.numpy(), axis=1), axis.numpy())
            for w in (w1, w2)
        ]
        return np.array(means) / weights


class RowByRow:
    """A potential evaluated one chain at a time: the same numbers for a chain whatever the
    batch (a vectorised exp over the batch may round an element by its place in the loop)."""

    def __init__(self, potential) -> None:
        self.potential = potential

    def __call__(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows = [self.potential(theta[k : k + 1]) for k in range(theta.shape[0])]
        return torch.cat([u for u, _ in rows]), torch.cat([g for _, g in rows])


def _within_ess(draws: np.ndarray, truth: np.ndarray, spread: np.ndarray) -> None:
    """Each quantity's estimate (mean over all draws) within 4.5 Monte Carlo standard errors
    of the truth, the standard error from the quantity's spread and bulk ESS."""
    ess = np.asarray(ess_bulk(draws))
    assert (ess > 100).all(), f"too few effective draws for the check: {ess}"
    error = np.abs(draws.mean(axis=(0, 1)) - truth)
    bound = 4.5 * spread / np.sqrt(ess)
    assert (error < bound).all(), f"errors {error} beyond {bound} (ESS {ess})"


def test_samples_a_correlated_gaussian_mean_and_covariance_within_their_mcse():
    target = correlated_gaussian(4)
    settings = HmcSettings(burn_in=150, draws=600, leapfrog_steps=6)
    run = run_chains(target, torch.zeros(6, 4), range(6), settings)
    draws = run.samples.numpy()
    mean, cov = target.mean.numpy(), target.cov.numpy()
    _within_ess(draws, mean, np.sqrt(np.diag(cov)))
    # the covariance entries as means of products of the centred coordinates
    i, j = np.triu_indices(4)
    centred = draws - mean
    products = centred[..., i] * centred[..., j]
    spread = np.sqrt(cov[i, i] * cov[j, j] + cov[i, j] ** 2)  # sd of a Gaussian product
    _within_ess(products, cov[i, j], spread)


def test_logistic_regression_posterior_mean_matches_quadrature():
    target = Logistic()
    settings = HmcSettings(burn_in=100, draws=800, leapfrog_steps=5)
    run = run_chains(target, torch.zeros(4, 2), [11, 12, 13, 14], settings)
    draws = run.samples.numpy()
    truth = target.quadrature_mean()
    _within_ess(draws, truth, draws.reshape(-1, 2).std(0))


def _energy_errors(target, theta, momentum, step: float, length: float) -> np.ndarray:
    u, grad = target(theta)
    steps = round(length / step)
    sizes = torch.full((theta.shape[0],), length / steps, dtype=torch.float64)
    _, p, u1, _ = leapfrog(target, theta, momentum, grad, sizes, steps)
    return ((u1 + kinetic(p)) - (u + kinetic(momentum))).abs().numpy()


def test_energy_error_at_a_fixed_trajectory_length_falls_as_the_step_size_squared():
    target = Logistic()
    g = torch.Generator().manual_seed(5)
    theta = torch.randn(32, 2, generator=g, dtype=torch.float64) * 0.5
    momentum = torch.randn(32, 2, generator=g, dtype=torch.float64)
    steps = np.array([0.2, 0.1, 0.05, 0.025])
    errors = [np.mean(_energy_errors(target, theta, momentum, s, 1.6)) for s in steps]
    slope = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert 1.8 < slope < 2.2, f"log-log slope {slope:.3f} (errors {errors})"


def test_leapfrog_runs_back_to_its_start_with_the_momentum_negated():
    target = correlated_gaussian(5, seed=3)
    g = torch.Generator().manual_seed(2)
    theta0 = torch.randn(3, 5, generator=g, dtype=torch.float64)
    p0 = torch.randn(3, 5, generator=g, dtype=torch.float64)
    sizes = torch.tensor([0.05, 0.1, 0.2], dtype=torch.float64)
    _, grad0 = target(theta0)
    theta1, p1, _, grad1 = leapfrog(target, theta0, p0, grad0, sizes, 40)
    assert not torch.allclose(theta1, theta0, atol=1e-3)  # it went somewhere
    theta2, p2, _, _ = leapfrog(target, theta1, -p1, grad1, sizes, 40)
    assert (theta2 - theta0).abs().max() < 1e-12
    assert (p2 + p0).abs().max() < 1e-12


def test_a_chain_is_bit_identical_alone_and_at_any_place_of_any_batch():
    target = RowByRow(Logistic(n=37))
    settings = HmcSettings(burn_in=15, draws=10, leapfrog_steps=4)
    start = torch.tensor([[0.5, 0.5], [-1.0, 2.0], [0.0, 0.0], [3.0, -3.0], [1.0, 0.0]])
    batch = run_chains(target, start, [7, 3, 9, 4, 8], settings)
    alone = run_chains(target, start[1:2], [3], settings)
    shuffled = run_chains(target, start[[4, 1, 0]], [8, 3, 7], settings)
    for other, row in ((alone, 0), (shuffled, 1)):
        assert torch.equal(other.samples[row], batch.samples[1])
        for field in ("accepted", "accept_prob", "energy_error", "step_size", "warmup_step_size"):
            assert np.array_equal(getattr(other, field)[row], getattr(batch, field)[1]), field
    assert torch.equal(shuffled.samples[0], batch.samples[4])
    assert not torch.equal(batch.samples[0], batch.samples[1])


@pytest.mark.parametrize("target_accept", [0.65, 0.85])
def test_acceptance_after_adaptation_lies_in_its_band(target_accept):
    target = correlated_gaussian(20, seed=4)
    settings = HmcSettings(burn_in=1000, draws=200, leapfrog_steps=8, target_accept=target_accept)
    run = run_chains(target, torch.zeros(4, 20), range(4), settings)
    rate = run.accept_prob.mean()
    assert abs(rate - target_accept) < 0.08, f"mean acceptance {rate:.3f}"
    assert run.accepted.mean() == pytest.approx(rate, abs=0.07)
    # the step size is frozen after burn-in, each trajectory's jittered within 10% of it
    sizes = run.step_size / run.step_size.mean(axis=1, keepdims=True)
    assert sizes.min() > 0.89 and sizes.max() < 1.11 and sizes.std() > 0.02


def test_records_name_every_kept_sample_with_its_chain_and_step():
    run = run_chains(Logistic(), torch.zeros(3, 2), [1, 2, 3], HmcSettings(burn_in=4, draws=5))
    records = run.records()
    assert list(records["chain"]) == [0] * 5 + [1] * 5 + [2] * 5
    assert list(records["seed"]) == [1] * 5 + [2] * 5 + [3] * 5
    assert list(records["step"][:5]) == [5, 6, 7, 8, 9]
    assert run.samples.shape == (3, 5, 2) and run.warmup_step_size.shape == (3, 4)
    prob = records["accept_prob"]
    assert ((prob >= 0) & (prob <= 1)).all()
    # an accepted proposal with a negative energy error always has probability 1
    assert (prob[records["energy_error"] <= 0] == 1).all()
    # a rejected sample repeats its predecessor
    flat = run.samples.reshape(-1, 2)
    for n in np.flatnonzero(~records["accepted"]):
        if n % 5:
            assert torch.equal(flat[n], flat[n - 1])


def test_a_diverging_trajectory_is_rejected_and_the_chain_stays():
    target = correlated_gaussian(3)
    settings = HmcSettings(burn_in=0, draws=3, leapfrog_steps=50, step_size=50.0, step_jitter=0)
    start = target.mean.expand(2, -1) + 0.5
    run = run_chains(target, start, [0, 1], settings)
    assert not run.accepted.any() and (run.accept_prob == 0).all()
    assert torch.equal(run.samples, start.unsqueeze(1).expand(2, 3, 3))


def test_step_size_search_brackets_an_acceptance_of_one_half():
    # for a standard Gaussian one leapfrog step of size e from (0, p) changes H by
    # e^4 p^2 / 8 (up to sign): the search stops where that crosses log 2
    def energy_change(steps: list[float]) -> list[float]:
        return [s**4 / 8.0 for s in steps]

    crossing = (8 * math.log(2)) ** 0.25
    for start in (1e-4, 1e3):
        (found,) = reasonable_step_sizes(energy_change, start, 1)
        assert crossing / 2 <= found <= crossing * 2
    # a chain whose every step diverges is halved until the search stops
    (tiny,) = reasonable_step_sizes(lambda steps: [math.inf] * len(steps), 1.0, 1)
    assert tiny == 2.0**-50


def test_dual_averaging_finds_the_step_size_of_a_known_acceptance_curve():
    # acceptance exp(-e): the step size with acceptance 0.7 is -log 0.7
    for start in (1e-3, 10.0):
        adapt = DualAveraging(start, 0.7)
        for _ in range(5000):
            adapt.update(math.exp(-adapt.step_size))
        assert adapt.final == pytest.approx(-math.log(0.7), rel=0.01)


def test_settings_and_inputs_are_checked():
    with pytest.raises(ValueError, match="target_accept"):
        HmcSettings(target_accept=1.0)
    with pytest.raises(ValueError, match="leapfrog_steps"):
        HmcSettings(leapfrog_steps=0)
    with pytest.raises(ValueError, match="one row per seed"):
        run_chains(Logistic(), torch.zeros(2, 2), [1, 2, 3], HmcSettings())
    with pytest.raises(ValueError, match="non-negative"):
        chain_generator(-1)
