"""The linearised network: equal to the network at the expansion point, exact for a change of
the last layer only (the network is linear in it), a first-order approximation elsewhere (its
error shrinks as the square of the step), and agreeing with an explicit Jacobian."""

from __future__ import annotations

import pytest
import torch
from torch.func import functional_call, jacrev

from symbnn.linearize import Linearized
from symbnn.models import build_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@torch.no_grad()
def linearized_logits(model, mode, sample, inputs):
    """f(x; mode) + J(x) (sample - mode) for one batch (the library's `Linearized`)."""
    return Linearized(model, mode, sample)(inputs)


@pytest.fixture
def network():
    torch.manual_seed(0)
    model = build_model({"name": "optunet", "conv1_channels": 4, "conv2_channels": 6, "hidden": 5})
    model.eval()
    state = {name: t.detach().clone().double() for name, t in model.state_dict().items()}
    return model.double(), state, torch.randn(7, 1, 28, 28, dtype=torch.float64)


def perturbed(state, scale, only=None, seed=1):
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, t in state.items():
        keep = not t.is_floating_point() or (only is not None and not name.startswith(only))
        noise = torch.randn(t.shape, generator=g, dtype=t.dtype) if not keep else 0
        out[name] = t + scale * noise
    return out


def logits(model, state, x):
    return functional_call(model, state, (x,))


def test_equals_the_network_at_the_expansion_point(network):
    model, state, x = network
    torch.testing.assert_close(linearized_logits(model, state, state, x), logits(model, state, x))


def test_exact_when_only_the_last_layer_moves(network):
    model, state, x = network
    last = [name for name, _ in model.named_modules() if isinstance(_, torch.nn.Linear)][-1]
    sample = perturbed(state, 0.5, only=last + ".")
    assert not torch.equal(logits(model, sample, x), logits(model, state, x))
    torch.testing.assert_close(
        linearized_logits(model, state, sample, x), logits(model, sample, x), rtol=1e-10, atol=1e-10
    )


def test_first_order_error_shrinks_quadratically(network):
    model, state, x = network
    errors = []
    for scale in (1e-2, 1e-3):
        sample = perturbed(state, scale)
        error = linearized_logits(model, state, sample, x) - logits(model, sample, x)
        errors.append(error.abs().max().item())
    # second-order remainder: 10x smaller step, about 100x smaller error
    assert errors[1] < errors[0] / 50


def test_matches_an_explicit_jacobian(network):
    model, state, x = network
    params = {name: p for name, p in state.items() if name in dict(model.named_parameters())}
    buffers = {name: t for name, t in state.items() if name not in params}
    sample = perturbed(state, 0.3)
    jac = jacrev(lambda p: functional_call(model, {**buffers, **p}, (x,)))(params)
    change = sum(
        (jac[name].flatten(2) @ (sample[name] - params[name]).flatten()) for name in params
    )
    torch.testing.assert_close(
        linearized_logits(model, state, sample, x), logits(model, state, x) + change
    )
