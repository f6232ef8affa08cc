"""Laplace (laplace-torch): on linear models the GGN is the exact Hessian, so the posterior
precision has a closed form (Bayesian linear regression: X^T X / sigma^2 + lambda I; softmax
regression: sum_i (diag(p_i) - p_i p_i^T) kron x_i x_i^T + lambda I); the samples follow that
Gaussian; the marginal-likelihood prior precision is the maximiser of the Laplace evidence;
and `sample_mode` on a tiny OptuNet problem keeps the method contract."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_sample_contract, sample_with
from scipy import optimize
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from symbnn.methods.laplace import fit as laplace

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def regression_problem(n=200, d=3, sigma=0.5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64)
    y = x @ w.T + 0.3 + sigma * torch.randn(n, 1, generator=g, dtype=torch.float64)
    return x, y


def fitted_linear(x, y):
    """Least-squares weights: the MAP up to the prior, which is irrelevant to the precision."""
    model = nn.Linear(x.shape[1], y.shape[1]).double()
    design = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], 1)
    coef = torch.linalg.lstsq(design, y).solution
    with torch.no_grad():
        model.weight.copy_(coef[:-1].T)
        model.bias.copy_(coef[-1])
    return model


def loader(x, y, batch=64):
    return DataLoader(TensorDataset(x, y), batch_size=batch)


def test_linear_regression_precision_and_samples_match_the_closed_form():
    sigma, prior = 0.5, 2.0
    x, y = regression_problem(sigma=sigma)
    model = fitted_linear(x, y)
    la = laplace.fit_laplace(
        model, loader(x, y), likelihood="regression", prior_precision=prior, sigma_noise=sigma
    )
    design = torch.cat(
        [x, torch.ones(len(x), 1, dtype=x.dtype)], 1
    )  # parameter order: weight, bias
    expected = design.T @ design / sigma**2 + prior * torch.eye(4, dtype=x.dtype)
    np.testing.assert_allclose(la.posterior_precision.numpy(), expected.numpy(), rtol=1e-8)
    # draws follow N(theta*, expected^-1)
    draws = la.sample(40_000, generator=torch.Generator().manual_seed(0)).numpy()
    mean = torch.cat([model.weight.flatten(), model.bias]).detach().numpy()
    cov = np.linalg.inv(expected.numpy())
    np.testing.assert_allclose(draws.mean(0), mean, atol=4 * np.sqrt(cov.diagonal().max() / 40_000))
    np.testing.assert_allclose(np.cov(draws.T), cov, rtol=0.05, atol=0.03 * cov.diagonal().max())


def test_softmax_regression_ggn_is_the_exact_hessian():
    g = torch.Generator().manual_seed(1)
    n, d, c, prior = 150, 4, 3, 0.7
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    labels = torch.randint(0, c, (n,), generator=g)
    model = nn.Linear(d, c).double()
    torch.nn.init.normal_(model.weight, std=0.5, generator=g)
    la = laplace.fit_laplace(model, loader(x, labels), prior_precision=prior)
    with torch.no_grad():
        p = torch.softmax(model(x), dim=1)
    design = torch.cat([x, torch.ones(n, 1, dtype=x.dtype)], 1)
    # theta = (W row-major, b): d logit_k / d W[k, j] = x_j, d logit_k / d b[k] = 1
    hessian = torch.zeros(c * (d + 1), c * (d + 1), dtype=x.dtype)
    weight_index = torch.arange(c * d).reshape(c, d)
    bias_index = c * d + torch.arange(c)
    index = torch.cat([weight_index, bias_index[:, None]], 1)  # (c, d + 1) -> parameter index
    for i in range(n):
        lam = torch.diag(p[i]) - torch.outer(p[i], p[i])
        block = torch.kron(lam, torch.outer(design[i], design[i]))
        flat = index.flatten()
        hessian[flat[:, None], flat[None, :]] += block
    expected = hessian + prior * torch.eye(c * (d + 1), dtype=x.dtype)
    np.testing.assert_allclose(
        la.posterior_precision.numpy(), expected.numpy(), rtol=1e-8, atol=1e-10
    )


def test_marginal_likelihood_prior_precision_maximizes_the_laplace_evidence():
    sigma = 0.5
    x, y = regression_problem(sigma=sigma, seed=3)
    model = fitted_linear(x, y)
    la = laplace.fit_laplace(model, loader(x, y), likelihood="regression", sigma_noise=sigma)
    theta = torch.cat([model.weight.flatten(), model.bias]).detach().numpy()
    design = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], 1).numpy()
    ggn = design.T @ design / sigma**2

    def negative_evidence(log_lam):  # the lambda-dependent terms of the Laplace log evidence
        lam = np.exp(log_lam)
        return -(
            -0.5 * lam * theta @ theta
            + 0.5 * len(theta) * np.log(lam)
            - 0.5 * np.linalg.slogdet(ggn + lam * np.eye(len(theta)))[1]
        )

    best = np.exp(optimize.minimize_scalar(negative_evidence, bounds=(-10, 10), method="bounded").x)
    assert float(la.prior_precision) == pytest.approx(best, rel=0.05)


def test_full_ggn_refused_beyond_the_dense_limit():
    model = nn.Linear(200, 120)
    with pytest.raises(ValueError, match="dense"):
        laplace.fit_laplace(model, loader(torch.randn(4, 200), torch.zeros(4, dtype=torch.long)))


@pytest.mark.parametrize(
    "settings",
    [
        {"prior_precision": 5.0},
        {"subset": "last_layer", "hessian": "kron", "prior_precision": "marglik"},
    ],
)
def test_sample_mode_contract_and_determinism(tiny_problem, tiny_mode, settings):
    first = sample_with("laplace", tiny_problem, tiny_mode, 3, settings, seed=7)
    assert_sample_contract(first, tiny_mode.state, 3)
    again = sample_with("laplace", tiny_problem, tiny_mode, 3, settings, seed=7)
    for name in first:
        assert torch.equal(first[name], again[name]), name
    spread = {name: float(first[name].std(0).max()) for name in first}
    if settings.get("subset") == "last_layer":  # only the classifier is random
        assert spread["fc2.weight"] > 0 and spread["conv1.weight"] == 0
    else:
        assert all(v > 0 for v in spread.values())
    with pytest.raises(ValueError, match="count"):
        sample_with("laplace", tiny_problem, tiny_mode, 0, settings, seed=7)


def test_samples_centre_on_the_mode(tiny_problem, tiny_mode):
    draws = sample_with("laplace", tiny_problem, tiny_mode, 200, {"prior_precision": 50.0}, seed=0)
    for name, value in tiny_mode.state.items():
        spread = draws[name].std(0)
        z = (draws[name].mean(0) - value).abs() / (spread / np.sqrt(200) + 1e-12)
        assert float(z.max()) < 5.0, name
