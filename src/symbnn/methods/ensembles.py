"""Deep Ensembles (Lakshminarayanan et al. 2017): each sample is one independently trained
network, so a member is its mode's weights as they are."""

from __future__ import annotations

from typing import Any

import torch

from symbnn.methods.base import Mode, Problem


def sample_mode(
    problem: Problem, mode: Mode, count: int, settings: dict[str, Any], seed: int
) -> dict[str, torch.Tensor]:
    if settings:
        raise ValueError(f"de takes no settings, got {', '.join(sorted(settings))}")
    if count != 1:
        raise ValueError(
            f"a Deep Ensemble member is one network; asked for {count} samples of one mode"
        )
    return {name: tensor.detach().cpu().unsqueeze(0).clone() for name, tensor in mode.state.items()}
