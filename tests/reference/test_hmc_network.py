"""HMC on networks: the full-batch potential is the summed cross-entropy plus the prior
lambda = N x weight decay, over the temperature (against autograd through the plain model);
chains of a tiny OptuNet on a few hundred digits are bit for bit the same alone, at any place
of a batch and on two threads; bad inputs raise clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from symbnn.data.core import TensorData
from symbnn.reference.hmc import HmcSettings
from symbnn.reference.network import (
    FullBatchPotential,
    Layout,
    prior_precision,
    sample_network,
)
from symbnn.train.batched import seeded_parameters, stacked_net
from symbnn.train.seeding import build_seeded_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OPTUNET = {"name": "optunet"}
MLP = {"name": "mlp", "widths": [6, 5, 3]}


@pytest.fixture(scope="module")
def digits():
    from symbnn.data import load_dataset

    return load_dataset("digits", "train", "data").limited(300)


def tabular(n: int = 70) -> TensorData:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 6, generator=g)
    return TensorData(x, (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long(), "blobs")


def autograd_potential(spec, train_x, train_y, state, precision, temperature):
    """U and its gradient through the plain model in float64, parameter by parameter."""
    model = build_seeded_model(spec, 0).double()
    params = {name: state[name].double().requires_grad_() for name, _ in model.named_parameters()}
    logits = torch.func.functional_call(model, params, (train_x.double(),))
    nll = F.cross_entropy(logits, train_y, reduction="sum")
    prior = sum((p * p).sum() for p in params.values()) * (0.5 * precision)
    u = (nll + prior) / temperature
    grads = torch.autograd.grad(u, list(params.values()))
    return u.detach(), torch.cat([g.reshape(-1) for g in grads])


def _potential(spec, train, k, precision, temperature, piece, dtype):
    template = build_seeded_model(spec, 0)
    net = stacked_net(template, train, "cpu", "none", dtype=dtype)
    layout = Layout.of(template)
    potential = FullBatchPotential(
        net, train.targets, layout, k, precision, temperature, piece, dtype=dtype
    )
    theta = layout.flatten(seeded_parameters(template, list(range(k))))
    return potential, layout, theta


def test_mlp_potential_is_the_summed_likelihood_and_prior_over_the_temperature():
    data = tabular()
    precision = prior_precision(len(data), 5e-3)
    potential, layout, theta = _potential(MLP, data, 3, precision, 0.5, 16, torch.float64)
    u, grad = potential(theta)
    for k in range(3):
        state = layout.unflatten(theta[k], torch.float64)
        ref_u, ref_grad = autograd_potential(MLP, data.inputs, data.targets, state, precision, 0.5)
        assert u[k].item() == pytest.approx(ref_u.item(), rel=1e-12)
        assert torch.allclose(grad[k], ref_grad, rtol=1e-10, atol=1e-10)
    assert potential.evaluations == 1


def test_optunet_potential_in_float32_agrees_with_autograd_in_float64(digits):
    precision = prior_precision(len(digits), 2e-4)
    potential, layout, theta = _potential(OPTUNET, digits, 2, precision, 1.0, 128, torch.float32)
    u, grad = potential(theta)
    assert u.dtype == grad.dtype == torch.float64
    x = digits.normalize(digits.images, torch.float64)
    for k in range(2):
        # the pass sees the parameters rounded to float32
        state = layout.unflatten(theta[k], torch.float32)
        ref_u, ref_grad = autograd_potential(OPTUNET, x, digits.labels, state, precision, 1.0)
        assert u[k].item() == pytest.approx(ref_u.item(), rel=1e-5)
        scale = ref_grad.abs().max()
        assert (grad[k] - ref_grad).abs().max() < 1e-4 * scale


def test_prior_precision_is_n_times_weight_decay_and_checked():
    assert prior_precision(4000, 2e-4) == pytest.approx(0.8)
    with pytest.raises(ValueError, match="weight_decay"):
        prior_precision(10, -1.0)


def test_optunet_chains_are_bit_identical_alone_in_any_batch_and_on_two_threads(digits):
    seeds = [10, 11, 12, 13, 14]
    initial = seeded_parameters(build_seeded_model(OPTUNET, 0), seeds)
    settings = HmcSettings(burn_in=3, draws=2, leapfrog_steps=3)
    precision = prior_precision(len(digits), 2e-4)

    def run(rows: list[int]):
        start = {name: tensor[rows] for name, tensor in initial.items()}
        return sample_network(
            OPTUNET, digits, start, [seeds[r] for r in rows], settings, precision, piece=128
        )

    batch = run([0, 1, 2, 3, 4])
    alone = run([2])
    torch.set_num_threads(2)  # restored by the fixture
    threads = run([4, 2, 0])
    for name in batch.states:
        assert batch.states[name].shape[:2] == (5, 2)
        assert torch.equal(alone.states[name][0], batch.states[name][2])
        assert torch.equal(threads.states[name][1], batch.states[name][2])
        assert torch.equal(threads.states[name][2], batch.states[name][0])
    assert (alone.run.energy_error[0] == batch.run.energy_error[2]).all()
    # the chains moved, and the search found each its own step size
    assert (
        not torch.equal(batch.run.samples[0, 0], batch.run.samples[0, 1])
        or not (batch.run.accepted[0, 1])
    )
    assert len(set(batch.run.step_size[:, 0])) == 5
    # the search's gradients, the first one's and one per leapfrog step
    assert batch.evaluations > 1 + (3 + 2) * 3


def test_a_network_with_buffers_is_refused(digits, monkeypatch):
    import symbnn.reference.network as network

    def with_batchnorm(spec, seed):
        return torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.BatchNorm1d(3))

    monkeypatch.setattr(network, "build_seeded_model", with_batchnorm)
    with pytest.raises(ValueError, match="BatchNorm"):
        sample_network({"name": "bn"}, tabular(), {}, [0], HmcSettings(), 1.0)


@pytest.fixture
def small_cnn():
    """A model of the user's own, named here in code: trusted (`symbnn.trust`)."""
    from symbnn import trust

    spec = {"name": "user_models:SmallCNN", "options": {"channels": 2, "hidden": 4}}
    trust.trust_model(spec["name"])
    yield spec
    trust.forget()


def test_a_network_without_a_hand_written_pass_samples_through_vmap(digits, small_cnn):
    spec = small_cnn
    few = digits.limited(40)
    initial = seeded_parameters(build_seeded_model(spec, 0), [0, 1])
    settings = HmcSettings(burn_in=2, draws=2, leapfrog_steps=2)
    chains = sample_network(spec, few, initial, [0, 1], settings, 1.0, piece=16)
    assert chains.states["classifier.3.bias"].shape == (2, 2, 10)
    assert torch.isfinite(chains.run.samples).all()
    assert np.isfinite(chains.run.energy_error).all()
    potential, layout, theta = _potential(spec, few, 1, 1.0, 1.0, 16, torch.float32)
    u, grad = potential(theta)
    state = layout.unflatten(theta[0], torch.float32)
    x = few.normalize(few.images, torch.float64)
    ref_u, ref_grad = autograd_potential(spec, x, few.labels, state, 1.0, 1.0)
    assert u[0].item() == pytest.approx(ref_u.item(), rel=1e-5)
    assert (grad[0] - ref_grad).abs().max() < 1e-4 * ref_grad.abs().max()


def test_bad_inputs_raise_clear_errors(digits):
    settings = HmcSettings(burn_in=1, draws=1, leapfrog_steps=1)
    initial = seeded_parameters(build_seeded_model(OPTUNET, 0), [0, 1])
    with pytest.raises(ValueError, match="2 starting states for 3 chain seeds"):
        sample_network(OPTUNET, digits, initial, [0, 1, 2], settings, 1.0)
    wrong = dict(initial, **{"fc2.bias": initial["fc2.bias"][:, :3]})
    with pytest.raises(ValueError, match="fc2.bias"):
        sample_network(OPTUNET, digits, wrong, [0, 1], settings, 1.0)
    with pytest.raises(ValueError, match="lack the parameters"):
        sample_network(OPTUNET, digits, {"fc2.bias": initial["fc2.bias"]}, [0, 1], settings, 1.0)
    regression = TensorData(torch.randn(8, 6), torch.randn(8), "reals")
    mlp_start = seeded_parameters(build_seeded_model(MLP, 0), [0])
    with pytest.raises(ValueError, match="cross-entropy of class labels"):
        sample_network(MLP, regression, mlp_start, [0], settings, 1.0)
    data = tabular()
    with pytest.raises(ValueError, match="temperature"):
        _potential(MLP, data, 1, 1.0, 0.0, 16, torch.float64)
