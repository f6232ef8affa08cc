"""Deep Ensembles (Lakshminarayanan et al. 2017): each sample is one independently trained
network, so a member is its mode's weights as they are."""

from __future__ import annotations

import torch

from symbnn.methods.base import Fitted, Mode, Problem, fitted_samples
from symbnn.settings import DeepEnsembles


def fit(problem: Problem, mode: Mode, settings: DeepEnsembles, seed: int, count: int) -> Fitted:
    if count != 1:
        raise ValueError(
            f"a Deep Ensemble member is one network; asked for {count} samples of one mode"
        )
    state = {name: t.detach().cpu().unsqueeze(0).clone() for name, t in mode.state.items()}
    return {"samples": state}


def sample(
    problem: Problem, fitted: Fitted, count: int, settings: DeepEnsembles, seed: int
) -> dict[str, torch.Tensor]:
    return fitted_samples("de", fitted, count)
