"""Each peer of benchmarks/peers.py (the `peers` extra) imports beside the pinned torch and
offers what the benchmark calls; skipped where the peer is not installed."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

TORCH = torch.__version__
OPTUNET = {"name": "optunet", "conv1_channels": 4, "conv2_channels": 12, "hidden": 10}


def _peer(module: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        found = pytest.importorskip(module)
    assert torch.__version__ == TORCH  # importing it moved no torch
    return found


def test_rebasin():
    rebasin = _peer("rebasin")
    assert callable(rebasin.PermutationCoordinateDescent)


def test_torch_uncertainty():
    _peer("torch_uncertainty")
    from torch_uncertainty.methods import SWAG, mc_dropout
    from torch_uncertainty.metrics.classification import FPR95, BrierScore

    assert callable(SWAG) and callable(mc_dropout) and callable(FPR95) and callable(BrierScore)


def test_blitz_builds_the_bayesian_optunet():
    _peer("blitz.modules")
    from peer_bnn import blitz_optunet

    model = blitz_optunet(OPTUNET, own_init=False)
    assert model(torch.zeros(2, 1, 28, 28)).shape == (2, 10)


def test_bayesian_torch_builds_the_bayesian_optunet_at_seed_0s_means():
    _peer("bayesian_torch")
    from peer_bnn import _bayesian_torch_kl, bayesian_torch_optunet

    from symbnn.settings import Bnn
    from symbnn.train.seeding import build_seeded_model

    model = bayesian_torch_optunet(OPTUNET, Bnn())
    assert model(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert torch.equal(model.fc1.mu_weight, build_seeded_model(OPTUNET, 0).fc1.weight)
    assert float(_bayesian_torch_kl(model).detach()) > 0


def test_posteriors_offers_the_three_methods_and_steps():
    posteriors = _peer("posteriors")

    def log_posterior(params, batch):
        return -(params["w"] - batch).square().sum(), torch.tensor([])

    transform = posteriors.sgmcmc.sghmc.build(log_posterior, lr=0.1, alpha=1.0, momenta=0.0)
    state = transform.init({"w": torch.zeros(3)})
    state, _ = transform.update(state, torch.ones(3), inplace=True)
    assert torch.allclose(state.params["w"], torch.zeros(3))  # moved by the old momentum, 0
    assert not torch.equal(state.momenta["w"], torch.zeros(3))
    assert callable(posteriors.vi.diag.build) and callable(posteriors.laplace.diag_ggn.build)
