"""SGHMC: the core update samples a known Gaussian; `sample_mode` on a tiny digits problem
returns well-formed, seed-determined samples; settings are validated. Seconds in all."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import assert_sample_contract, sample_with
from scipy.linalg import solve_discrete_lyapunov

from symbnn.data import load_dataset
from symbnn.data.core import ImageData
from symbnn.methods.base import Mode, Problem
from symbnn.methods.sghmc import fit as sghmc
from symbnn.settings import Recipe, Sghmc

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MU = np.array([1.0, -2.0])
SIGMA = np.array([[2.0, 0.8], [0.8, 1.0]])
LR, FRICTION, GRAD_NOISE = 0.0025, 0.05, 0.25  # GRAD_NOISE: variance of the injected gradient noise


def stationary_covariance(
    lr: float, friction: float, temperature: float, grad_noise: float
) -> np.ndarray:
    """Exact stationary covariance of theta under the linear recursion the update defines on
    U = (theta - mu)^T A (theta - mu) / 2 with gradient noise N(0, grad_noise I):
    v' = (1 - a) v - lr A theta + w, theta' = theta + v', w ~ N(0, 2 a lr T I + lr^2 grad_noise I)."""
    a_mat, eye = np.linalg.inv(SIGMA), np.eye(2)
    transition = np.block(
        [[eye - lr * a_mat, (1 - friction) * eye], [-lr * a_mat, (1 - friction) * eye]]
    )
    w = (2 * friction * lr * temperature + lr**2 * grad_noise) * eye
    return solve_discrete_lyapunov(transition, np.block([[w, w], [w, w]]))[:2, :2]


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_core_update_samples_a_gaussian(temperature):
    # M independent chains (the update is element-wise, so a batch of chains is one tensor)
    # each run past burn-in; their final states are M independent draws.
    chains, steps = 20_000, 600
    a_mat = torch.tensor(np.linalg.inv(SIGMA), dtype=torch.float64)
    mu = torch.tensor(MU, dtype=torch.float64)
    theta = torch.tensor([4.0, 3.0], dtype=torch.float64).repeat(chains, 1)  # far from the mean
    velocity = torch.zeros_like(theta)
    noise_gen, grad_gen = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
    for _ in range(steps):
        grad = (theta - mu) @ a_mat  # exact gradient of the potential, A symmetric
        grad += math.sqrt(GRAD_NOISE) * torch.randn(
            theta.shape, generator=grad_gen, dtype=theta.dtype
        )
        sghmc.sghmc_step(theta, velocity, grad, LR, FRICTION, temperature, noise_gen)
    x = theta.numpy()
    target = temperature * SIGMA

    # the scheme's own stationary covariance is within 2% (of the scale sqrt(S_ii S_jj)) of
    # the target (1.4% at most here): discretisation and the un-corrected gradient noise,
    # which adds lr^2 grad_noise to the injected 2 friction lr T, are a small bias
    exact = stationary_covariance(LR, FRICTION, temperature, GRAD_NOISE)
    scale = np.sqrt(np.outer(np.diag(target), np.diag(target)))
    bias = np.abs(exact - target) / scale
    assert bias.max() < 0.02
    # the transient from the start decays as rho^steps with rho the transition's spectral
    # radius (~0.975 here, 39 steps per e-fold): 600 steps leave e^-15 of it

    # sampling tolerance: 5 standard errors of M iid Gaussian draws
    # (se of a mean: sqrt(S_ii / M); of a covariance entry: sqrt((S_ii S_jj + S_ij^2) / M))
    se_mean = np.sqrt(np.diag(target) / chains)
    np.testing.assert_array_less(np.abs(x.mean(0) - MU), 5 * se_mean)
    cov = np.cov(x, rowvar=False)
    se_cov = np.sqrt((np.outer(np.diag(target), np.diag(target)) + target**2) / chains)
    np.testing.assert_array_less(np.abs(cov - exact), 5 * se_cov)
    np.testing.assert_array_less(np.abs(cov - target), 5 * se_cov + 0.02 * scale)


def test_zero_temperature_is_heavy_ball_descent():
    # without noise the update is SGD with momentum 1 - friction: it converges to the minimum
    theta, velocity = torch.tensor([3.0, -1.0]), torch.zeros(2)
    for _ in range(500):
        sghmc.sghmc_step(
            theta, velocity, 2 * (theta - torch.tensor([0.5, 0.25])), 0.05, 0.2, 0.0, None
        )
    torch.testing.assert_close(theta, torch.tensor([0.5, 0.25]), atol=1e-5, rtol=0)


# ---------------------------------------------------------------- sample_mode


@pytest.fixture(scope="module")
def problem_and_mode(tiny_problem, tiny_mode):
    return tiny_problem, tiny_mode


QUICK = {"burn_in_epochs": 1, "sample_every_epochs": 0.5}  # 4 steps per epoch: 2 steps


def test_sample_mode_shapes_and_determinism(problem_and_mode):
    problem, mode = problem_and_mode
    reference = problem.build().state_dict()
    a = sample_with("sghmc", problem, mode, 3, QUICK, seed=0)
    assert_sample_contract(a, reference, 3)
    # samples move away from the mode and from each other
    assert not torch.equal(a["fc2.weight"][0], mode.state["fc2.weight"])
    assert not torch.equal(a["fc2.weight"][0], a["fc2.weight"][1])
    again = sample_with("sghmc", problem, mode, 3, QUICK, seed=0)
    for name in a:
        torch.testing.assert_close(again[name], a[name], rtol=0, atol=0)
    other = sample_with("sghmc", problem, mode, 3, QUICK, seed=1)
    assert not torch.equal(other["conv1.weight"], a["conv1.weight"])
    # the mode's state is not modified
    assert not any(t.requires_grad for t in mode.state.values())


def test_sample_mode_stores_batchnorm_buffers():
    # ResNet-18 (the only shipped model with BatchNorm) on 8 one-channel 8x8 crops, 2 steps
    digits = load_dataset("digits", "train", "data").limited(8)
    train = ImageData(
        digits.images[:, :, 10:18, 10:18].contiguous(), digits.labels, 10, digits.mean, digits.std
    )
    problem = Problem(
        {"name": "resnet18", "num_classes": 10, "in_channels": 1},
        Recipe(epochs=1, batch_size=4, lr=0.1),
        train,
    )
    state = problem.build().state_dict()
    out = sample_with(
        "sghmc",
        problem,
        Mode(0, state),
        2,
        {"burn_in_epochs": 0, "sample_every_epochs": 0.5},
        seed=0,
    )
    assert list(out) == list(state)
    # running statistics track the chain's train-mode forwards: they moved, differently per sample
    assert not torch.equal(out["bn1.running_mean"][0], state["bn1.running_mean"])
    assert not torch.equal(out["bn1.running_mean"][0], out["bn1.running_mean"][1])
    assert out["bn1.num_batches_tracked"].tolist() == [1, 2]


@pytest.mark.parametrize(
    "settings, key",
    [
        ({"lr": -1}, "sghmc.lr"),
        ({"lr": 0}, "sghmc.lr"),
        ({"friction": 1.5}, "sghmc.friction"),
        ({"friction": 0}, "sghmc.friction"),
        ({"temperature": -0.1}, "sghmc.temperature"),
        ({"weight_decay": float("nan")}, "sghmc.weight_decay"),
        ({"burn_in_epochs": -1}, "sghmc.burn_in_epochs"),
        ({"sample_every_epochs": 0}, "sghmc.sample_every_epochs"),
        ({"sample_every_epochs": True}, "sghmc.sample_every_epochs"),
        ({"lr": "fast"}, "sghmc.lr"),
        ({"step_size": 0.1}, "sghmc.step_size"),
    ],
)
def test_bad_settings_raise_naming_the_key(problem_and_mode, settings, key):
    problem, mode = problem_and_mode
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        sample_with("sghmc", problem, mode, 1, settings, seed=0)


def test_step_and_prior_scale_with_the_training_set_size():
    """The settings are per example: the step on the summed potential is lr / N and the prior
    precision N * weight_decay, both defaulting to the recipe's last rate and weight decay."""
    recipe = Recipe(epochs=4, batch_size=8, lr=0.04, weight_decay=2e-4, milestones=(2,), gamma=0.5)
    lr, precision = sghmc.scaled(Sghmc(), recipe, 4000)
    assert lr == pytest.approx(0.02) and precision == pytest.approx(0.8)
    assert sghmc.scaled(Sghmc(), recipe, 60_000)[1] == pytest.approx(12.0)
    lr, precision = sghmc.scaled(Sghmc(variant="momentum", lr=0.1, weight_decay=0.0), recipe, 4000)
    assert (lr, precision) == (0.1, 0.0)


def test_a_longer_chain_starts_with_the_shorter_ones_samples(problem_and_mode):
    """Prefix-stable: one chain serves the single-mode variant (n samples) and the multi-mode
    variant (its first n / modes)."""
    problem, mode = problem_and_mode
    short = sample_with("sghmc", problem, mode, 2, QUICK, seed=0)
    long = sample_with("sghmc", problem, mode, 4, QUICK, seed=0)
    for name in short:
        torch.testing.assert_close(long[name][:2], short[name], rtol=0, atol=0)
