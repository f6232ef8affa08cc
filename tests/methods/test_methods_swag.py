"""SWAG: the running moments match numpy, draws follow the stated Gaussian, the BatchNorm
refresh recomputes running statistics, `sample_mode` on a tiny digits problem returns
well-formed seed-determined samples, and settings are validated. Seconds in all."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_sample_contract, sample_with
from torch import nn

from symbnn.data import load_dataset
from symbnn.data.core import ImageData
from symbnn.methods.base import Mode, Problem
from symbnn.methods.swag import fit as swag
from symbnn.settings import Recipe, Swag

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def collected(n: int, dim: int, rank: int, seed: int = 0) -> tuple[swag.SwagMoments, np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, dim)) * rng.uniform(0.5, 2.0, size=dim) + rng.normal(size=dim)
    moments = swag.SwagMoments(dim, rank)
    for v in vectors:
        moments.collect(torch.from_numpy(v))
    return moments, vectors


def covariance(moments: swag.SwagMoments, scale: float) -> np.ndarray:
    """The dense covariance the sampler draws from, from the moments' parts:
    scale * (diag(Sigma_diag) + D D^T / (R - 1)), the low-rank term only for R >= 2."""
    cov = np.diag(moments.diag_var.numpy())
    d = moments.deviations.to(torch.float64).numpy()
    if d.shape[1] >= 2:
        cov = cov + d @ d.T / (d.shape[1] - 1)
    return scale * cov


def numpy_deviations(vectors: np.ndarray, rank: int) -> np.ndarray:
    """(dim, rank): theta_k minus the mean of theta_1..theta_k, for the last `rank` k."""
    running = np.cumsum(vectors, axis=0) / np.arange(1, len(vectors) + 1)[:, None]
    return (vectors - running)[-rank:].T


def test_moments_match_numpy():
    moments, vectors = collected(30, 7, rank=5)
    assert moments.n == 30
    np.testing.assert_allclose(moments.mean.numpy(), vectors.mean(0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(moments.diag_var.numpy(), vectors.var(0), rtol=1e-9, atol=1e-12)
    # the low-rank part holds only the last `rank` deviations, oldest first
    np.testing.assert_allclose(
        moments.deviations.numpy(), numpy_deviations(vectors, 5), rtol=1e-9, atol=1e-12
    )


def test_deviations_before_the_buffer_fills_and_diagonal_only():
    moments, vectors = collected(3, 4, rank=5)
    assert moments.deviations.shape == (4, 3)
    np.testing.assert_allclose(
        moments.deviations.numpy(), numpy_deviations(vectors, 3), rtol=1e-9, atol=1e-12
    )
    # fewer than 2 deviations: the low-rank term is left out (SWAG-Diagonal)
    for rank in (0, 1):
        diagonal, vectors = collected(6, 4, rank=rank)
        assert diagonal.deviations.shape == (4, rank)
        np.testing.assert_allclose(
            covariance(diagonal, 0.3), 0.3 * np.diag(vectors.var(0)), rtol=1e-9
        )
        x = diagonal.sample(20_000, torch.Generator().manual_seed(0), 0.3).numpy()
        # off-diagonal sample covariance: 5 standard errors sqrt(S_ii S_jj / M)
        var = 0.3 * vectors.var(0)
        off = np.cov(x, rowvar=False) - np.diag(np.diag(np.cov(x, rowvar=False)))
        np.testing.assert_array_less(np.abs(off), 5 * np.sqrt(np.outer(var, var) / 20_000))


def test_samples_follow_the_swag_gaussian():
    """The reference implementation's convention: covariance scale * (diag + D D^T / (K - 1)),
    so that the paper's "scale 0.1" means what it meant there."""
    dim, rank, k, scale, draws = 4, 3, 10, 0.7, 100_000
    moments, vectors = collected(k, dim, rank, seed=1)
    d = numpy_deviations(vectors, rank)
    expected_cov = scale * (np.diag(vectors.var(0)) + d @ d.T / (rank - 1))
    np.testing.assert_allclose(covariance(moments, scale), expected_cov, rtol=1e-9, atol=1e-12)

    x = moments.sample(draws, torch.Generator().manual_seed(0), scale).numpy()
    assert x.shape == (draws, dim)
    # 5 standard errors of `draws` iid Gaussian draws: sqrt(S_ii / M) for a mean,
    # sqrt((S_ii S_jj + S_ij^2) / M) for a covariance entry
    var = np.diag(expected_cov)
    np.testing.assert_array_less(np.abs(x.mean(0) - vectors.mean(0)), 5 * np.sqrt(var / draws))
    se_cov = np.sqrt((np.outer(var, var) + expected_cov**2) / draws)
    np.testing.assert_array_less(np.abs(np.cov(x, rowvar=False) - expected_cov), 5 * se_cov)
    # same generator seed, same draws
    first = moments.sample(5, torch.Generator().manual_seed(3), scale).numpy()
    np.testing.assert_array_equal(
        moments.sample(5, torch.Generator().manual_seed(3), scale).numpy(), first
    )


def test_sample_needs_two_iterates():
    moments, _ = collected(1, 3, rank=2)
    with pytest.raises(ValueError, match="at least 2"):
        moments.sample(1)


# ---------------------------------------------------------------- BatchNorm refresh


def test_refresh_batchnorm_recomputes_running_statistics():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(3, 4), nn.BatchNorm1d(4, momentum=0.3), nn.ReLU(), nn.Linear(4, 2)
    )
    bn = model[1]
    bn.running_mean.fill_(5.0)
    bn.running_var.fill_(9.0)
    model.eval()
    x = torch.randn(90, 3) * torch.tensor([1.0, 3.0, 0.5]) + torch.tensor([2.0, -1.0, 0.0])
    batches = list(x.split(30))  # three equal batches
    swag.refresh_batchnorm(model, batches)
    with torch.no_grad():
        h = model[0](x)
    # size-weighted averages of the batch statistics: the data mean exactly, and the mean of
    # the batches' unbiased variances
    torch.testing.assert_close(bn.running_mean, h.mean(0), rtol=1e-5, atol=1e-5)
    batch_vars = torch.stack([hb.var(0, unbiased=True) for hb in h.split(30)])
    torch.testing.assert_close(bn.running_var, batch_vars.mean(0), rtol=1e-5, atol=1e-5)
    assert bn.momentum == 0.3 and not model.training  # restored

    # unequal batches: still the exact data mean (weights by batch size, not per batch)
    swag.refresh_batchnorm(model, [x[:64], x[64:]])
    torch.testing.assert_close(bn.running_mean, h.mean(0), rtol=1e-5, atol=1e-5)
    # one batch holding all the data: exactly its mean and unbiased variance
    swag.refresh_batchnorm(model, [x])
    torch.testing.assert_close(bn.running_var, h.var(0, unbiased=True), rtol=1e-5, atol=1e-5)


def test_refresh_leaves_models_without_batchnorm_alone():
    model = nn.Sequential(nn.Linear(3, 2))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    swag.refresh_batchnorm(model, [torch.randn(4, 3)])
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k], rtol=0, atol=0)


# ---------------------------------------------------------------- sample_mode


@pytest.fixture(scope="module")
def problem_and_mode(tiny_problem, tiny_mode):
    return tiny_problem, tiny_mode


QUICK = {"epochs": 2, "snapshots": 4, "rank": 3}  # 8 SGD steps, a snapshot every second one


def test_sample_mode_shapes_and_determinism(problem_and_mode):
    problem, mode = problem_and_mode
    reference = problem.build().state_dict()
    a = sample_with("swag", problem, mode, 3, QUICK, seed=0)
    assert_sample_contract(a, reference, 3)
    assert not torch.equal(a["fc2.weight"][0], a["fc2.weight"][1])
    again = sample_with("swag", problem, mode, 3, QUICK, seed=0)
    for name in a:
        torch.testing.assert_close(again[name], a[name], rtol=0, atol=0)
    other = sample_with("swag", problem, mode, 3, QUICK, seed=1)
    assert not torch.equal(other["conv1.weight"], a["conv1.weight"])


def test_samples_centre_on_the_swa_mean(problem_and_mode):
    problem, mode = problem_and_mode
    settings = Swag.parse(QUICK, "swag")
    _, moments = swag.fit_swag(problem, mode, settings, seed=0)
    out = sample_with("swag", problem, mode, 2, {**QUICK, "scale": 1e-12}, seed=0)
    flat = torch.cat([out[name][0].reshape(-1) for name, _ in problem.build().named_parameters()])
    torch.testing.assert_close(flat, moments.mean.float(), rtol=0, atol=1e-5)


def small_crops(n: int) -> ImageData:
    digits = load_dataset("digits", "train", "data").limited(n)
    return ImageData(
        digits.images[:, :, 10:18, 10:18].contiguous(), digits.labels, 10, digits.mean, digits.std
    )


def test_sample_mode_refreshes_batchnorm():
    # ResNet-18 (the only shipped model with BatchNorm) on 8 one-channel 8x8 crops, 2 steps
    train = small_crops(8)
    problem = Problem(
        {"name": "resnet18", "num_classes": 10, "in_channels": 1},
        Recipe(epochs=1, batch_size=4, lr=0.1, momentum=0.9),
        train,
    )
    state = problem.build().state_dict()
    settings = {"epochs": 1, "snapshots": 2, "rank": 2, "lr": 0.01}
    out = sample_with("swag", problem, Mode(0, state), 1, settings, seed=0)
    assert list(out) == list(state)
    # the refresh is one pass in 2 batches after a reset: the stem's BatchNorm then holds the
    # size-weighted mean of the sample's conv1 outputs over the training images
    model = problem.build({name: t[0] for name, t in out.items()})
    with torch.no_grad():
        h = model.conv1(train.normalize(train.images))
    torch.testing.assert_close(
        out["bn1.running_mean"][0], h.mean(dim=(0, 2, 3)), rtol=1e-4, atol=1e-5
    )
    assert int(out["bn1.num_batches_tracked"][0]) == 2
    kept = sample_with("swag", problem, Mode(0, state), 1, {**settings, "bn_update": False}, seed=0)
    assert int(kept["bn1.num_batches_tracked"][0]) == 2  # the SGD steps' count, not a refresh
    assert not torch.equal(kept["bn1.running_mean"][0], out["bn1.running_mean"][0])


@pytest.mark.parametrize(
    "settings, key",
    [
        ({"lr": -1}, "swag.lr"),
        ({"epochs": 0}, "swag.epochs"),
        ({"epochs": 2.0}, "swag.epochs"),
        ({"snapshots": 1}, "swag.snapshots"),
        ({"snapshots": 100}, "swag.snapshots"),  # more than the 8 SGD steps of 2 epochs
        ({"rank": 0}, "swag.rank"),
        ({"rank": -2}, "swag.rank"),
        ({"scale": 0}, "swag.scale"),
        ({"scale": float("inf")}, "swag.scale"),
        ({"bn_update": 1}, "swag.bn_update"),
        ({"rnak": 20}, "swag.rnak"),
    ],
)
def test_bad_settings_raise_naming_the_key(problem_and_mode, settings, key):
    problem, mode = problem_and_mode
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        sample_with("swag", problem, mode, 1, {"epochs": 2, **settings}, seed=0)


def test_schedule_ramps_linearly_to_the_high_rate_then_collects_evenly():
    recipe = Recipe(epochs=4, batch_size=8, lr=0.04, milestones=(2,), gamma=0.25)  # ends at 0.01
    lrs, collect = swag.schedule(Swag(ramp=0.25, snapshots=4), recipe, steps_per_epoch=5)
    assert len(lrs) == 2 * 4 * 5  # twice the recipe's epochs by default
    ramp = 10  # a quarter of the 40 steps
    np.testing.assert_allclose(lrs[:ramp], 0.01 + 0.03 * np.arange(1, ramp + 1) / ramp)
    assert all(lr == 0.04 for lr in lrs[ramp:])  # the recipe's initial rate
    assert sorted(collect) == [ramp + 30 * k // 4 for k in range(1, 5)] and max(collect) == 40
    lrs, _ = swag.schedule(Swag(epochs=3, lr=0.5, ramp=0.0, snapshots=2), recipe, 5)
    assert lrs == [0.5] * 15
    with pytest.raises(
        ValueError, match="swag.snapshots must be <= the 5 SGD steps after the ramp"
    ):
        swag.schedule(Swag(epochs=2, ramp=0.5, snapshots=6), recipe, 5)
