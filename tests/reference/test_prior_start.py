"""The reference's `start: prior`: each mode's starting network is a draw from the Gaussian
prior N(0, 1 / (N x weight decay)) fixed by the seed, and chains started there run their
longer burn-in, adapt their step size into the target acceptance's band and leave the prior
draw for the posterior's bulk (a tiny MLP on 3 classes, a few seconds)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from symbnn.data.core import TensorData
from symbnn.methods.base import Problem
from symbnn.reference.chains import prior_starts, run_reference
from symbnn.reference.network import Layout, prior_precision
from symbnn.settings import Recipe, Reference
from symbnn.settings.hmc import PRIOR_BURN_IN
from symbnn.train.seeding import build_seeded_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MLP = {"name": "mlp", "widths": [6, 32, 3]}
WEIGHT_DECAY = 0.05


def tabular(n: int = 80) -> TensorData:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 6, generator=g)
    return TensorData(x, (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long(), "blobs")


def prior(**changes) -> Reference:
    return Reference.parse({"start": "prior", "chains": 4, "modes": 2, **changes}, "reference")


def starts(reference: Reference, precision: float) -> torch.Tensor:
    layout = Layout.of(build_seeded_model(MLP, 0))
    state, mode_seeds = prior_starts(layout, reference, precision)
    assert mode_seeds == [-1] * reference.chains
    return layout.flatten(state)


def test_a_prior_start_is_a_prior_draw_per_mode_fixed_by_the_seed():
    precision = prior_precision(80, WEIGHT_DECAY)
    theta = starts(prior(seed=3), precision)
    assert theta.shape == (4, Layout.of(build_seeded_model(MLP, 0)).size)
    # chain k starts from mode k mod 2: chains of one mode share their start, modes differ
    assert torch.equal(theta[0], theta[2]) and torch.equal(theta[1], theta[3])
    assert not torch.equal(theta[0], theta[1])
    # the seed fixes the draws: the same again, others for another seed
    assert torch.equal(starts(prior(seed=3), precision), theta)
    other = starts(prior(seed=10), precision)
    assert not torch.isclose(other[:2], theta[:2]).any()
    # N(0, 1 / precision): 2 x 323 values, mean and spread within a few standard errors
    values = theta[:2].reshape(-1).numpy()
    scale = 1.0 / np.sqrt(precision)
    assert abs(values.mean()) < 4 * scale / np.sqrt(values.size)
    assert values.std() == pytest.approx(scale, rel=0.12)


def test_a_prior_start_needs_a_proper_prior():
    with pytest.raises(ValueError, match="weight decay is 0"):
        starts(prior(), 0.0)


def _accuracy(spec, data: TensorData, state: dict[str, torch.Tensor]) -> float:
    model = build_seeded_model(spec, 0)
    model.load_state_dict(state)
    with torch.no_grad():
        return float((model(data.inputs).argmax(1) == data.targets).double().mean())


def test_chains_from_the_prior_burn_in_longer_adapt_and_leave_the_prior_draw():
    data = tabular()
    recipe = Recipe(epochs=1, batch_size=16, lr=0.05, weight_decay=WEIGHT_DECAY)
    problem = Problem(MLP, recipe, data, "cpu")
    reference = prior(chains=2, modes=2, draws=60, leapfrog_steps=5, seed=1)
    assert reference.burn_in_iterations == PRIOR_BURN_IN
    chains, mode_seeds = run_reference(problem, reference, None, None)
    run = chains.run
    assert mode_seeds == [-1, -1]
    # the longer burn-in ran before the kept draws
    assert run.warmup_step_size.shape == (2, PRIOR_BURN_IN)
    assert (run.step[:, 0] == PRIOR_BURN_IN + 1).all()
    # the step size adapted from the search's: every chain's acceptance lands in a band
    # around the target, far from a step too small (acceptance near 1) or too large (near 0).
    # The band is wider above: the frozen step is dual averaging's running average of its
    # log-steps, which after a short burn-in leans toward the early, smaller steps.
    for k in range(2):
        rate = run.accept_prob[k].mean()
        low, high = reference.target_accept - 0.15, 0.92
        assert low < rate < high, f"chain {k}: acceptance {rate:.3f}"
        assert abs(run.step_size[k].mean() / run.warmup_step_size[k, 0] - 1) > 0.2
    # and the chains left the prior draw for networks that fit the data
    precision = prior_precision(len(data), WEIGHT_DECAY)
    layout = Layout.of(build_seeded_model(MLP, 0))
    start = layout.unflatten(starts(reference, precision), torch.float32)
    for k in range(2):
        before = _accuracy(MLP, data, {name: value[k] for name, value in start.items()})
        after = np.mean(
            [
                _accuracy(MLP, data, {name: value[k, s] for name, value in chains.states.items()})
                for s in range(reference.draws)
            ]
        )
        assert after > max(0.7, before + 0.1), f"chain {k}: accuracy {before:.2f} -> {after:.2f}"
