"""Helpers of the symmetry property tests: random states of any module (the recipe of
`symbnn.symmetry.testing.random_state`), a small VGG, networks' outputs and the relative
difference of docs/maths.md, section 1."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from symbnn.models import build_model
from symbnn.symmetry.testing import randomized


def random_module_state(
    model: torch.nn.Module, seed: int = 0, dtype=torch.float64, bias_std: float = 0.1
) -> dict[str, torch.Tensor]:
    """One network's state for any module (`random_state`'s recipe): the module's own
    conv/linear weights, every bias and BatchNorm tensor drawn at random."""
    g = torch.Generator().manual_seed(seed)
    return {
        name: randomized(name, t.detach().clone(), t.dim(), g, dtype, bias_std)
        for name, t in model.state_dict().items()
    }


def small_vgg11_bn(num_classes: int = 10, width: int = 64) -> torch.nn.Module:
    """torchvision's VGG11-bn with its classifier narrowed from 4096 to ``width`` units: the
    same layers, BatchNorms and 7 x 7 flatten into the first linear layer (a sliced,
    non-plain structure), 1.6 million classifier weights instead of 120 million, so that
    tests on it run in seconds."""
    from torch import nn
    from torchvision.models import vgg11_bn

    model = vgg11_bn(weights=None, num_classes=num_classes)
    flat = model.classifier[0].in_features
    model.classifier[0] = nn.Linear(flat, width)
    model.classifier[3] = nn.Linear(width, width)
    model.classifier[6] = nn.Linear(width, num_classes)
    return model


def outputs(
    spec_or_model: dict[str, Any] | torch.nn.Module,
    state: Mapping[str, torch.Tensor],
    x: torch.Tensor,
) -> torch.Tensor:
    """Eval-mode outputs (n, batch, classes) of each network of a stacked state on inputs x."""
    model = build_model(spec_or_model) if isinstance(spec_or_model, dict) else spec_or_model
    model = model.to(x.dtype).eval()
    n = next(iter(state.values())).shape[0]
    results = []
    with torch.no_grad():
        for i in range(n):
            model.load_state_dict({k: v[i] for k, v in state.items()})
            results.append(model(x))
    return torch.stack(results)


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |a|, the function-preservation measure of docs/maths.md, section 1."""
    return float((a - b).abs().max() / a.abs().max().clamp_min(torch.finfo(a.dtype).tiny))
