"""Bayes-by-backprop sampler: the ELBO pieces against closed forms (scale-mixture log prior vs
scipy, the Monte-Carlo KL vs the Gaussian KL), the trained mean-field q against the optimal
mean-field solution of Bayesian linear regression, and the method contract (keys, shapes,
count, BatchNorm buffers, determinism, validation)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import assert_sample_contract, sample_with
from scipy import stats
from scipy.special import logsumexp
from torch import nn

from symbnn.methods.base import Mode
from symbnn.methods.bnn import fit as bnn
from symbnn.settings import Bnn, Recipe
from symbnn.train.seeding import build_seeded_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OPTUNET = {"name": "optunet"}


# ---------------------------------------------------------------- closed forms


@pytest.mark.parametrize(
    "pi, s1, s2", [(1.0, 0.1, 0.4), (0.0, 0.1, 0.4), (0.3, 0.1, 0.4), (0.75, 1.0, 0.01)]
)
def test_scale_mixture_log_prior_matches_scipy(pi, s1, s2):
    w = torch.tensor(
        [-30.0, -3.0, -0.5, -1e-3, 0.0, 2e-2, 0.3, 1.0, 7.0, 50.0], dtype=torch.float64
    )
    got = bnn.log_scale_mixture_prior(w, pi, s1, s2).numpy()
    x = w.numpy()
    with np.errstate(divide="ignore"):  # log(0) weights of an absent component
        expected = logsumexp(
            [np.log(pi) + stats.norm.logpdf(x, 0, s1), np.log1p(-pi) + stats.norm.logpdf(x, 0, s2)],
            axis=0,
        )
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert np.isfinite(got).all()  # no underflow to -inf far in the tails
    if 0 < pi < 1:  # against the density itself where it does not underflow
        inner = np.abs(x) < 1
        with np.errstate(divide="ignore"):
            direct = np.log(pi * stats.norm.pdf(x, 0, s1) + (1 - pi) * stats.norm.pdf(x, 0, s2))
        np.testing.assert_allclose(got[inner], direct[inner], rtol=1e-10)
    # gradients stay finite in the tails
    w32 = w.float().requires_grad_()
    bnn.log_scale_mixture_prior(w32, pi, s1, s2).sum().backward()
    assert torch.isfinite(w32.grad).all()


def test_log_normal_matches_scipy():
    x = torch.linspace(-3, 3, 13, dtype=torch.float64)
    np.testing.assert_allclose(
        bnn.log_normal(x, 0.4, 0.7).numpy(), stats.norm.logpdf(x.numpy(), 0.4, 0.7), rtol=1e-12
    )


def test_monte_carlo_kl_matches_closed_form_gaussian_kl():
    # a real wrapper (an MLP's 8 tensors), q(w) = N(mu, sigma^2), prior N(0, 0.5^2) (pi = 1)
    net = build_seeded_model({"name": "mlp", "widths": [6, 5, 4, 3]}, 0).double()
    q = bnn.MeanFieldBNN(net, rho_init=-2.0, prior_pi=1.0, prior_sigma1=0.5, prior_sigma2=0.4)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for rho in q.rho:
            rho.copy_(torch.empty_like(rho).uniform_(-3.0, 0.5, generator=g))
        closed = float(sum(bnn.gaussian_kl(m, s, 0.5) for m, s in zip(q.mu, q.sigmas())))
        draws = torch.tensor([float(q.draw(g)[1]) for _ in range(3000)], dtype=torch.float64)
    standard_error = draws.std().item() / math.sqrt(len(draws))
    assert abs(draws.mean().item() - closed) < 4 * standard_error
    assert standard_error < 0.02 * closed  # the check has teeth
    # and the elementwise estimator on its own
    mu = torch.tensor([0.0, 0.3, -1.2], dtype=torch.float64)
    sigma = torch.tensor([0.2, 1.0, 0.05], dtype=torch.float64)
    eps = torch.randn(20000, 3, generator=g, dtype=torch.float64)
    per_draw = torch.stack(
        [bnn.kl_sample(mu + sigma * e, sigma, e, 1.0, 0.8, 0.4) for e in eps[:4000]]
    )
    closed = bnn.gaussian_kl(mu, sigma, 0.8).item()
    expected = sum(
        math.log(0.8 / s) + (s * s + m * m) / (2 * 0.64) - 0.5
        for m, s in zip(mu.tolist(), sigma.tolist())
    )
    assert closed == pytest.approx(expected, rel=1e-12)
    assert abs(per_draw.mean().item() - closed) < 4 * per_draw.std().item() / math.sqrt(
        len(per_draw)
    )


# ---------------------------------------------------------------- Bayesian linear regression


def test_mean_field_q_matches_optimal_solution_of_linear_regression():
    """y = X w + b + noise (std 0.5), prior N(0, 1) on (w, b). The posterior is N(m, S) with
    S^-1 = A = Phi^T Phi / noise^2 + I (Phi = [X, 1]), m = A^-1 Phi^T y / noise^2; the mean-field
    q minimising KL(q || posterior) has mean m and variances 1 / diag(A). Tolerance: mean
    within 0.15 optimal standard deviations, standard deviations within 10% (Adam on the
    full-batch ELBO with 4 draws per step, iterates of the second half averaged)."""
    g = torch.Generator().manual_seed(0)
    n, d, noise = 40, 3, 0.5
    mixing = torch.tensor([[1.0, 0.4, 0.0], [0.0, 0.6, 0.5], [0.0, 0.0, 0.5]], dtype=torch.float64)
    X = torch.randn(n, d, generator=g, dtype=torch.float64) @ mixing + 0.5  # correlated, off-centre
    w_true = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    y = X @ w_true + 0.3 + noise * torch.randn(n, generator=g, dtype=torch.float64)
    phi = torch.cat([X, torch.ones(n, 1, dtype=torch.float64)], 1)
    A = phi.T @ phi / noise**2 + torch.eye(d + 1, dtype=torch.float64)
    m = torch.linalg.solve(A, phi.T @ y / noise**2)
    sd = 1 / torch.diagonal(A).sqrt()
    # the correlated posterior's own marginals are wider: mean-field really is a different target
    assert (torch.diagonal(torch.linalg.inv(A)).sqrt() > 1.5 * sd).any()

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = nn.Linear(d, 1).double()  # weight (1, 3), bias (1,)
    q = bnn.MeanFieldBNN(
        net,
        rho_init=-3.0,
        prior_pi=1.0,
        prior_sigma1=1.0,
        prior_sigma2=0.4,
        noise=torch.Generator().manual_seed(1),
    )
    assert len(list(q.parameters())) == 4  # mu and rho of weight and bias, nothing else
    initial_error = ((torch.cat([p.detach().flatten() for p in q.mu]) - m) / sd).abs().max()
    nll = bnn.gaussian_nll(noise)
    optimizer = torch.optim.Adam(q.parameters(), lr=0.05)
    steps = 800
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda t: 0.002 ** (t / steps))
    mu_sum, sigma_sum, kept = 0.0, 0.0, 0
    for t in range(steps):  # full batch: the loss is the negative ELBO / n
        loss = q.elbo_loss(X, y, n, samples=4, kl_weight=1.0, nll=nll)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if t >= steps // 2:  # average the second half's iterates
            mu_sum = mu_sum + torch.cat([p.detach().flatten() for p in q.mu])
            sigma_sum = sigma_sum + torch.cat([s.detach().flatten() for s in q.sigmas()])
            kept += 1
    mu, sigma = mu_sum / kept, sigma_sum / kept
    assert initial_error > 5
    # Monte-Carlo gradient noise is what is left: 16 draws per step bring both errors under
    # 0.02; with 4 draws they stay under 0.06 for the noise seeds tried
    assert ((mu - m) / sd).abs().max() < 0.15, (mu, m, sd)
    assert (sigma / sd - 1).abs().max() < 0.1, (sigma, sd)


def test_gaussian_nll_is_minus_mean_log_likelihood():
    out = torch.tensor([[0.5], [1.0], [-2.0]], dtype=torch.float64)
    y = torch.tensor([0.0, 1.5, -2.0], dtype=torch.float64)
    expected = -stats.norm.logpdf(y.numpy(), out[:, 0].numpy(), 0.3).mean()
    assert bnn.gaussian_nll(0.3)(out, y).item() == pytest.approx(expected, rel=1e-12)


def test_elbo_loss_is_nll_plus_scaled_kl():
    net = build_seeded_model({"name": "mlp", "widths": [4, 3, 2]}, 0)
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    y = torch.tensor([0, 1, 1, 0, 1])
    q = bnn.MeanFieldBNN(net, -4.0, 1.0, 0.1, 0.4, noise=torch.Generator().manual_seed(3))
    loss = q.elbo_loss(x, y, n_data=100, samples=2, kl_weight=0.5)
    q.noise = torch.Generator().manual_seed(3)  # replay the same two draws
    expected = 0.0
    for _ in range(2):
        w, kl = q.draw()
        expected = expected + nn.functional.cross_entropy(q.forward_with(w, x), y) + 0.5 * kl / 100
    assert loss.item() == pytest.approx((expected / 2).item(), rel=1e-6)


# ---------------------------------------------------------------- wrapper and buffers


def test_wrapper_parameters_batchnorm_buffers_and_sample_moments():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3))
    q = bnn.MeanFieldBNN(net, -2.0, 1.0, 0.1, 0.4, noise=torch.Generator().manual_seed(0))
    assert [p.shape for p in q.parameters()] == [p.shape for p in net.parameters()] * 2
    assert all(torch.equal(m, p) for m, p in zip(q.mu, net.parameters()))
    assert all((r == -2.0).all() for r in q.rho)
    q.train()
    assert net.training
    q(torch.randn(16, 4) + 3.0)  # train-mode forward updates the network's own statistics
    assert net[1].num_batches_tracked.item() == 1 and net[1].running_mean.abs().min() > 0
    q.eval()
    assert not net.training
    samples = q.sample_states(4000, torch.Generator().manual_seed(1))
    assert set(samples) == set(net.state_dict())
    for name in ("1.running_mean", "1.running_var", "1.num_batches_tracked"):
        assert torch.equal(
            samples[name], net.state_dict()[name].unsqueeze(0).expand_as(samples[name])
        )
    sigma = nn.functional.softplus(torch.tensor(-2.0))
    for name, mu in zip(q.names, q.mu):
        s = samples[name]
        assert ((s.mean(0) - mu.detach()).abs() < 5 * sigma / math.sqrt(4000)).all()
        assert ((s.std(0) / sigma - 1).abs() < 0.1).all()


# ---------------------------------------------------------------- the sampler


def test_sample_mode_contract_and_determinism(tiny_problem):
    mode = Mode(seed=1, state={})  # the state is ignored: q starts from the seed's initial weights
    a = sample_with("bnn", tiny_problem, mode, 5, {}, seed=3)
    reference = tiny_problem.build().state_dict()
    assert_sample_contract(a, reference, 5)
    b = sample_with("bnn", tiny_problem, mode, 5, {"elbo_samples": 3}, seed=3)
    assert all(torch.equal(a[n], b[n]) for n in a)
    c = sample_with("bnn", tiny_problem, mode, 5, {}, seed=4)
    assert not torch.equal(a["fc2.weight"], c["fc2.weight"])
    # samples are distinct draws around the trained mean, which moved away from the init
    init = build_seeded_model(OPTUNET, 1).state_dict()
    spread = a["conv1.weight"].std(0)
    assert (spread > 0).all() and (spread < 0.01).all()  # sigma = softplus(-7) ~ 9e-4
    assert (a["conv1.weight"].mean(0) - init["conv1.weight"]).abs().max() > 0.01
    model = tiny_problem.build({n: t[0] for n, t in a.items()}).eval()
    out = model(tiny_problem.train.normalize(tiny_problem.train.images[:4]))
    assert out.shape == (4, 10) and torch.isfinite(out).all()


def test_recipe_changes_apply_to_the_experiment_recipe():
    options = Bnn.parse({"recipe": {"lr": 0.01}, "elbo_samples": 2}, "bnn")
    assert options.elbo_samples == 2
    base = Recipe(epochs=3, batch_size=8, lr=0.04, momentum=0.9, weight_decay=2e-4)
    recipe = options.recipe.apply(base)
    assert (recipe.weight_decay, recipe.lr, recipe.epochs, recipe.momentum) == (0.0, 0.01, 3, 0.9)
    assert Bnn().recipe.apply(base).weight_decay == 0.0  # B.1: no weight decay


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"elbo_samples": 0}, "bnn.elbo_samples: must be >= 1, got 0"),
        ({"elbo_samples": 2.0}, "bnn.elbo_samples"),
        ({"kl_weight": -1.0}, "bnn.kl_weight: must be >= 0"),
        ({"kl_weight": "one"}, "bnn.kl_weight"),
        ({"prior_pi": 1.5}, "bnn.prior_pi: must lie in [0, 1]"),
        ({"prior_sigma1": 0.0}, "bnn.prior_sigma1: must be > 0"),
        ({"prior_sigma2": -0.4}, "bnn.prior_sigma2: must be > 0"),
        ({"rho_init": float("inf")}, "bnn.rho_init"),
        ({"rho_init": True}, "bnn.rho_init"),
        ({"recipe": [1]}, "bnn.recipe"),
        ({"recipe": {"nope": 1}}, "bnn.recipe"),
        ({"recipe": {"lr": -1.0}}, "bnn.recipe"),
        ({"samples": 3}, "bnn.samples"),
    ],
)
def test_bad_settings_raise(tiny_problem, settings, message):
    with pytest.raises(ValueError) as info:
        sample_with("bnn", tiny_problem, Mode(0, {}), 2, settings, seed=0)
    assert message in str(info.value)
