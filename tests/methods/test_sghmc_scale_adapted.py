"""The scale-adapted SGHMC sampler (the paper's reference code, H_SA_SGHMC): its core samples
known posteriors, a Gaussian with the hyperprior off and a Normal-Gamma model with it on; the
network chain keeps the registry's contract for both variants and, from a trained mode, a
trained network's accuracy; its settings and schedule follow the reference's.

Tolerances come from the effective sample size: every posterior check takes the final states
of M independent chains (batched in one tensor: the update is element-wise), so the draws are
independent and the effective sample size is M exactly. The checks allow 4 standard errors
(a two-sided 6e-5 chance per entry for a correct sampler) plus the scheme's own bias, which
test (1) computes exactly from the linear recursion the sampler follows on a Gaussian.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import assert_sample_contract, repo_config, sample_with

from symbnn.data import load_dataset
from symbnn.methods.base import Mode, Problem
from symbnn.methods.sghmc import fit as sghmc
from symbnn.methods.sghmc.dynamics import (
    NOISE_FLOOR,
    GammaHyperprior,
    GaussianPrior,
    ScaleAdaptedSghmc,
)
from symbnn.settings import ConfigError, Methods, Recipe, Sghmc
from symbnn.train.loop import train_one

pytestmark = pytest.mark.usefixtures("one_torch_thread")

Z = 4.0  # standard errors allowed
LR, FRICTION, EVERY = 0.05, 0.05, 50  # step, friction (the reference's base C), momentum redraws
GRAD_NOISE = 3.0  # standard deviation of the noise added to every gradient (a minibatch's)


def run_chains(sampler: ScaleAdaptedSghmc, likelihood_grad, steps: int, noise_gen) -> None:
    for _ in range(steps):
        grad = likelihood_grad(sampler.theta)
        grad += GRAD_NOISE * torch.randn(grad.shape, generator=noise_gen, dtype=grad.dtype)
        sampler.step(grad)


def frozen_law(sampler: ScaleAdaptedSghmc, x0, v0, hessian, first_step: int, steps: int):
    """Per chain, the exact mean (d, M) and covariance (d, d, M) of x = theta - mode after
    `steps` more updates from (x0, v0) of shape (M, d), for U = x^T H x / 2 with Gaussian
    gradient noise: past burn-in the preconditioner is fixed, the update is the linear
    recursion v' = (1 - a) v - eta (H x + noise) + w, x' = x + v', with w ~ N(0, q) of the
    documented q = max(2 a eta - lr^4, 1e-16), and v redrawn from N(0, eta) every EVERY steps."""
    m, d = x0.shape
    h = torch.as_tensor(hessian, dtype=torch.float32)  # float32 is ample over 800 steps
    eta = (LR**2 * sampler.scales.preconditioner()).view(m, d).T.float()
    kick = (2 * FRICTION * eta - LR**4).clamp(min=NOISE_FLOOR) + eta**2 * GRAD_NOISE**2
    eye = torch.eye(d)[:, :, None]
    keep = 1 - FRICTION
    mean_x, mean_v = x0.T.float().clone(), v0.T.float().clone()
    cov_xx = torch.zeros(d, d, m)  # given (x0, v0): no spread yet
    cov_xv, cov_vv = torch.zeros_like(cov_xx), torch.zeros_like(cov_xx)

    def h_times(block):  # H @ block for each chain
        return (h @ block.reshape(d, -1)).reshape(block.shape)

    for step in range(first_step, first_step + steps):
        if (step - 1) % EVERY == 0:
            mean_v, cov_xv, cov_vv = torch.zeros_like(mean_v), torch.zeros_like(cov_xv), eye * eta
        h_xx = h_times(cov_xx)
        # v' = keep v - B x + w with B = diag(eta) H
        b_xv = eta[:, None] * h_times(cov_xv)
        cov_vv = (
            keep**2 * cov_vv
            - keep * (b_xv + b_xv.transpose(0, 1))
            + eta[:, None] * h_times(h_xx.transpose(0, 1)) * eta[None]
            + eye * kick
        )
        x_with_v = keep * cov_xv - h_xx.transpose(0, 1) * eta[None]  # Cov(x, v')
        cov_xx = cov_xx + x_with_v + x_with_v.transpose(0, 1) + cov_vv
        cov_xv = x_with_v + cov_vv
        mean_v = keep * mean_v - eta * (h @ mean_x)
        mean_x = mean_x + mean_v
    return mean_x.double(), cov_xx.double()


# --------------------------------------------------------- (1) a Gaussian, no hyperprior

MU = np.array([1.0, -2.0, 0.5])
SIGMA = np.array([[2.0, 0.8, 0.3], [0.8, 1.0, -0.2], [0.3, -0.2, 0.5]])


def test_core_samples_a_correlated_gaussian():
    chains, burn_in, steps = 8000, 1000, 800
    d, a_mat = len(MU), np.linalg.inv(SIGMA)
    a_t, mu = torch.tensor(a_mat, dtype=torch.float32), torch.tensor(MU, dtype=torch.float32)
    start = mu + torch.tensor([2.8, -2.0, 1.4])  # 2 sd out
    theta = start.repeat(chains, 1).reshape(-1)
    gen, grad_gen = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
    sampler = ScaleAdaptedSghmc(
        theta,
        GaussianPrior([theta.numel()]),
        LR,
        FRICTION,
        gen,
        burn_in_steps=burn_in,
        momentum_every=EVERY,
    )

    def likelihood_grad(flat):
        return ((flat.view(chains, d) - mu) @ a_t).reshape(-1)

    run_chains(sampler, likelihood_grad, burn_in, grad_gen)
    x0, v0 = theta.view(chains, d) - mu, sampler.velocity.view(chains, d).clone()
    run_chains(sampler, likelihood_grad, steps, grad_gen)
    x = (theta.view(chains, d) - mu).double().numpy()
    assert np.abs(x - x0.numpy()).max() > 1.0  # the chains moved

    # each chain's final state is N(m_c, P_c) given its burn-in: x's mean and second moment
    # over chains have expectation mean(m_c), mean(P_c + m_c m_c^T) and exact variances
    m_c, p_c = (t.numpy() for t in frozen_law(sampler, x0, v0, a_mat, burn_in + 1, steps))
    expect_mean, expect_second = m_c.mean(1), (p_c + m_c[:, None] * m_c[None]).mean(2)
    se_mean = np.sqrt(np.einsum("iim->i", p_c) / chains**2)
    diag_p = np.einsum("iim->im", p_c)
    var_second = (
        diag_p[:, None] * diag_p[None]
        + p_c**2
        + m_c[:, None] ** 2 * diag_p[None]
        + m_c[None] ** 2 * diag_p[:, None]
        + 2 * m_c[:, None] * m_c[None] * p_c
    )
    se_second = np.sqrt(var_second.sum(-1)) / chains
    # the sampler follows the documented recursion: within 4 standard errors of its law
    np.testing.assert_array_less(np.abs(x.mean(0) - expect_mean), Z * se_mean)
    second = x.T @ x / chains
    np.testing.assert_array_less(np.abs(second - expect_second), Z * se_second)
    # and the law is the posterior's within the scheme's bias: discretisation, the lr^4
    # correction overshooting where the gradient is not all noise (a cooler chain), and
    # chains still on their way back: at most 3% of the scale sqrt(S_ii S_jj) here
    scale = np.sqrt(np.outer(np.diag(SIGMA), np.diag(SIGMA)))
    bias_second = np.abs(expect_second - SIGMA)
    assert (bias_second / scale).max() < 0.03
    assert (np.abs(expect_mean) / np.sqrt(np.diag(SIGMA))).max() < 0.03
    # hence against the posterior itself
    np.testing.assert_array_less(np.abs(x.mean(0)), Z * se_mean + np.abs(expect_mean))
    np.testing.assert_array_less(np.abs(second - SIGMA), Z * se_second + bias_second)


# --------------------------------------------- (2) Normal-Gamma model, hyperprior on

X = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, -0.5], [0.5, 0.0, 1.0], [1.0, 1.0, 1.0]])
Y = np.array([2.0, -1.0, 1.5, 2.5])
NOISE_SD = 1.0  # sigma of y | theta
ALPHA0, BETA0 = 2.0, 2.0  # a broad hyperprior: the marginal differs from any fixed precision


def normal_gamma_posterior():
    """Exact posterior moments by quadrature over lambda: lambda | y has density proportional
    to Gamma(lambda; alpha0, beta0) N(y; 0, sigma^2 I + X X^T / lambda), and theta | lambda, y
    is N(m(lambda), S(lambda)) with S = (X^T X / sigma^2 + lambda I)^-1, m = S X^T y / sigma^2.
    Returns theta's mean, covariance and fourth central moments, lambda's mean and variance."""
    log_lam = np.linspace(-10.0, 5.0, 6001)
    lam = np.exp(log_lam)
    n, d = X.shape
    gram = NOISE_SD**2 * np.eye(n) + (X @ X.T)[None] / lam[:, None, None]
    _, logdet = np.linalg.slogdet(gram)
    quad = np.einsum("i,lij,j->l", Y, np.linalg.inv(gram), Y)
    # the Gamma density in log lambda carries the Jacobian lambda
    log_w = ALPHA0 * log_lam - BETA0 * lam - 0.5 * logdet - 0.5 * quad
    w = np.exp(log_w - log_w.max())
    w /= np.trapezoid(w, log_lam)

    def expect(f):
        return np.trapezoid(w.reshape(-1, *[1] * (f.ndim - 1)) * f, log_lam, axis=0)

    cov_l = np.linalg.inv(X.T @ X / NOISE_SD**2 + lam[:, None, None] * np.eye(d))
    mean_l = cov_l @ (X.T @ Y / NOISE_SD**2)
    mean = expect(mean_l)
    cov = expect(cov_l + mean_l[:, :, None] * mean_l[:, None]) - np.outer(mean, mean)
    delta, s = mean_l - mean, np.einsum("lii->li", cov_l)
    fourth = expect(delta**4 + 6 * delta**2 * s + 3 * s**2)
    return mean, cov, fourth, expect(lam), expect(lam**2) - expect(lam) ** 2


def test_core_with_hyperprior_samples_a_normal_gamma_posterior():
    chains, burn_in, steps = 8000, 1000, 800
    n, d = X.shape
    mean, cov, fourth, lam_mean, lam_var = normal_gamma_posterior()
    theta = torch.zeros(chains * d)
    hyperprior = GammaHyperprior(ALPHA0, BETA0, 15)
    prior = GaussianPrior([d] * chains, hyperprior=hyperprior, rng=np.random.default_rng(2))
    gen, grad_gen = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
    sampler = ScaleAdaptedSghmc(
        theta, prior, LR, FRICTION, gen, burn_in_steps=burn_in, momentum_every=EVERY
    )
    gram = torch.tensor(X.T @ X / NOISE_SD**2, dtype=torch.float32)
    xty = torch.tensor(X.T @ Y / NOISE_SD**2, dtype=torch.float32)

    def likelihood_grad(flat):
        return (flat.view(chains, d) @ gram - xty).reshape(-1)

    run_chains(sampler, likelihood_grad, burn_in + steps, grad_gen)
    t = theta.view(chains, d).double().numpy()
    # M independent final states: standard errors from the exact posterior's moments; the
    # allowance for the scheme's bias is test (1)'s (same step, friction and gradient noise)
    tol_mean = Z * np.sqrt(np.diag(cov) / chains) + 0.03 * np.sqrt(np.diag(cov))
    tol_var = Z * np.sqrt((fourth - np.diag(cov) ** 2) / chains) + 0.03 * np.diag(cov)
    np.testing.assert_array_less(np.abs(t.mean(0) - mean), tol_mean)
    variance = ((t - mean) ** 2).mean(0)
    np.testing.assert_array_less(np.abs(variance - np.diag(cov)), tol_var)
    # the test can fail: a fixed precision (the posterior mean's) misses the variances
    plug_in = np.linalg.inv(X.T @ X / NOISE_SD**2 + lam_mean * np.eye(d))
    assert (np.abs(np.diag(plug_in) - np.diag(cov)) > 2 * tol_var).any()
    # the last precision drawn (lambda | theta, one per chain) follows lambda | y
    lam = prior.precisions
    assert abs(lam.mean() - lam_mean) < Z * math.sqrt(lam_var / chains) + 0.03 * lam_mean


def test_gibbs_draw_is_the_gamma_conditional():
    # two tensors of 3 and 5 elements: lambda_k ~ Gamma(a0 + n_k / 2, b0 + ||theta_k||^2 / 2)
    theta = torch.tensor([1.0, -1.0, 2.0, 0.5, 0.5, 0.5, 0.5, 0.0])
    prior = GaussianPrior(
        [3, 5], hyperprior=GammaHyperprior(2.0, 1.0, 3), rng=np.random.default_rng(0)
    )
    draws = []
    for step in range(1, 3 * 2000 + 1):
        prior.refresh(theta, step)
        if (step - 1) % 3 == 0:
            draws.append(prior.precisions.copy())
    draws = np.array(draws)
    shape, rate = np.array([2 + 1.5, 2 + 2.5]), np.array([1 + 3.0, 1 + 0.5])
    se = np.sqrt(shape / rate**2 / len(draws))
    np.testing.assert_array_less(np.abs(draws.mean(0) - shape / rate), Z * se)
    # steps between draws keep the precision; the prior's gradient uses it per tensor
    prior.refresh(theta, 2)
    np.testing.assert_array_equal(prior.precisions, draws[-1])
    grad = prior.add_gradient(torch.zeros(8), theta)
    expected = torch.tensor(np.repeat(draws[-1], [3, 5]), dtype=torch.float32) * theta
    torch.testing.assert_close(grad, expected)


def test_burn_in_adapts_then_freezes_the_preconditioner():
    theta = torch.zeros(4)
    sampler = ScaleAdaptedSghmc(
        theta, GaussianPrior([4]), 0.01, 0.05, None, burn_in_steps=3, momentum_every=50
    )
    for k in range(3):
        sampler.step(torch.full((4,), 10.0 * (k + 1)))
    adapted = sampler.scales.square.clone()
    # after the first step g = grad, V^ = grad^2 (a window of one): the estimates follow grad
    assert adapted.min() > 100
    sampler.step(torch.full((4,), 1e4))
    torch.testing.assert_close(sampler.scales.square, adapted, rtol=0, atol=0)


# ------------------------------------------------------------------- the network chain


@pytest.mark.parametrize("variant", ["scale_adapted", "momentum"])
def test_chain_contract_for_both_variants(tiny_problem, tiny_mode, variant):
    settings = {"variant": variant, "burn_in_epochs": 1, "sample_every_epochs": 0.5}
    a = sample_with("sghmc", tiny_problem, tiny_mode, 4, settings, seed=0)
    assert_sample_contract(a, tiny_problem.build().state_dict(), 4)
    assert not torch.equal(a["fc2.weight"][0], a["fc2.weight"][1])
    again = sample_with("sghmc", tiny_problem, tiny_mode, 2, settings, seed=0)
    for name in a:  # deterministic for a seed, and prefix-stable
        torch.testing.assert_close(again[name], a[name][:2], rtol=0, atol=0)
    other = sample_with("sghmc", tiny_problem, tiny_mode, 2, settings, seed=1)
    assert not torch.equal(other["conv1.weight"], a["conv1.weight"][:2])


def test_the_hyperprior_switch_and_the_fixed_prior(tiny_problem, tiny_mode):
    base = {"burn_in_epochs": 1, "sample_every_epochs": 0.5}
    fixed = sample_with("sghmc", tiny_problem, tiny_mode, 2, {**base, "hyperprior": False}, 0)
    sampled = sample_with("sghmc", tiny_problem, tiny_mode, 2, base, 0)
    assert not torch.equal(fixed["fc1.weight"], sampled["fc1.weight"])
    # without the hyperprior every tensor's precision is N * weight decay (the recipe's, or
    # the setting's); with it, each tensor's is drawn at the first step
    model = tiny_problem.build(tiny_mode.state)
    theta = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    sizes = [p.numel() for p in model.parameters()]
    for options, precision in [({}, 256 * 2e-4), ({"weight_decay": 0.01}, 2.56)]:
        settings = Sghmc(hyperprior=False, **options)
        moves = sghmc.sampler(settings, theta.clone(), sizes, tiny_problem, 4, seed=0)
        np.testing.assert_allclose(moves.prior.precisions, [precision] * len(sizes))
    moves = sghmc.sampler(Sghmc(), theta.clone(), sizes, tiny_problem, 4, seed=0)
    moves.step(torch.zeros_like(theta))
    assert len(set(moves.prior.precisions)) == len(sizes)


WIDE = {"name": "optunet", "conv1_channels": 4, "conv2_channels": 12, "hidden": 10}


@pytest.fixture(scope="module")
def trained():
    """A trained mode on 1,000 digits of every class (the packaged set is sorted by label)."""
    train = load_dataset("digits", "train", "data").subset(slice(0, 4000, 4))
    test = load_dataset("digits", "test", "data")
    recipe = Recipe(
        epochs=20, batch_size=64, lr=0.05, momentum=0.9, weight_decay=2e-4, milestones=(10,)
    )
    threads = torch.get_num_threads()  # module fixtures start before `one_torch_thread`
    torch.set_num_threads(1)
    try:
        model, _ = train_one(WIDE, recipe, train, seed=3)
    finally:
        torch.set_num_threads(threads)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return Problem(WIDE, recipe, train), Mode(3, state), test


def accuracy(problem: Problem, state, data) -> float:
    model = problem.build(state).eval()
    with torch.no_grad():
        predicted = model(data.normalize(data.images)).argmax(1)
    return float((predicted == data.labels).float().mean())


@pytest.mark.parametrize("variant", ["scale_adapted", "momentum"])
def test_a_short_chain_from_a_trained_mode_keeps_its_accuracy(trained, variant):
    problem, mode, test = trained
    at_mode = accuracy(problem, mode.state, test)
    assert at_mode > 0.7  # the mode trained (chance is 0.1)
    settings = {"variant": variant, "burn_in_epochs": 1, "sample_every_epochs": 1}
    samples = sample_with("sghmc", problem, mode, 3, settings, seed=0)
    scores = [accuracy(problem, {k: v[i] for k, v in samples.items()}, test) for i in range(3)]
    # posterior samples at N = 1000 move off the mode but stay good networks; a chain that
    # diverged, or ignored the likelihood, would be near chance
    assert min(scores) > 0.8 * at_mode, scores
    assert not torch.equal(samples["fc2.weight"][0], mode.state["fc2.weight"])


# ------------------------------------------------------------- settings and schedule


def test_the_defaults_keep_the_reference_proportions_to_the_recipe():
    """Unset, the chain is 250/60 of the recipe's epochs, burn-in 20/60, spacing 2/60: the
    reference's MNIST chain for the paper's 60-epoch recipe, and 115 samples for any recipe."""
    paper = Recipe(epochs=60, batch_size=64, lr=0.04)
    plan = sghmc.schedule(Sghmc(batch_size=256), paper, 60_000)
    assert plan.epochs == (250, 20, 2) and plan.steps_per_epoch == 235
    assert (plan.burn_in, plan.spacing, plan.length) == (20 * 235, 2 * 235, 250 * 235)
    assert plan.capacity == 115
    laptop = Recipe(epochs=12, batch_size=64, lr=0.1)
    plan = sghmc.schedule(Sghmc(), laptop, 4000)
    assert plan.epochs == pytest.approx((50, 4, 0.4)) and plan.steps_per_epoch == 63
    assert (plan.burn_in, plan.spacing) == (252, 25) and plan.capacity == 115
    with pytest.raises(ValueError, match="116 samples asked for.*holds 115; raise sghmc.epochs"):
        plan.check(116)


def test_mnist_optunet_runs_the_cited_schedule():
    experiment = repo_config()["experiments"]["mnist-optunet"]
    methods = Methods.parse(experiment["methods"], "methods")
    settings = methods.sghmc
    assert settings.variant == "scale_adapted"
    assert (settings.epochs, settings.burn_in_epochs, settings.sample_every_epochs) == (250, 20, 2)
    assert (
        settings.batch_size == 256
        and settings.hyperprior
        and (settings.alpha0, settings.beta0) == (10, 10)
    )
    assert settings.variant_default("lr") == 0.01 and settings.variant_default("friction") == 0.05
    assert (settings.prior_resample_steps, settings.momentum_resample_steps) == (15, 50)
    recipe = Recipe.parse(experiment["recipe"], "recipe")
    plan = sghmc.schedule(settings, recipe, 60_000)
    assert plan.capacity == 115 >= methods.n_samples == 100


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"temperature": 0.5}, "sghmc.temperature: applies to variant momentum only"),
        ({"variant": "momentum", "alpha0": 2}, "sghmc.alpha0: applies to variant scale_adapted"),
        ({"weight_decay": 1e-4}, "sghmc.weight_decay: the hyperprior samples"),
        (
            {"epochs": 10, "burn_in_epochs": 9, "sample_every_epochs": 2},
            "sghmc.epochs: 10 epochs hold no sample",
        ),
        ({"variant": "hmc"}, "sghmc.variant: must be one of scale_adapted, momentum"),
        ({"prior_resample_steps": 0}, "sghmc.prior_resample_steps: must be >= 1"),
    ],
)
def test_settings_that_do_not_apply_are_refused(settings, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        Sghmc.parse(settings, "sghmc")


def test_a_chain_too_short_for_its_samples_is_refused(tiny_problem, tiny_mode):
    settings = {"epochs": 2, "burn_in_epochs": 1, "sample_every_epochs": 0.5}
    with pytest.raises(ValueError, match="3 samples asked for.*holds 2"):
        sample_with("sghmc", tiny_problem, tiny_mode, 3, settings, seed=0)
