"""Random networks for property tests and benchmarks (the tests' own helpers, e.g. the
networks' outputs, are in tests/symmetry_checks.py).

Random states keep the model's own initialisation for conv/linear weights (so deep networks
keep outputs of order one) and draw every BatchNorm tensor at random, so that symmetry tests
exercise gamma, beta and the running statistics rather than their trivial defaults.
"""

from __future__ import annotations

from typing import Any

import torch

from symbnn.models import build_model


def random_state(
    spec: dict[str, Any], n: int, seed: int = 0, dtype=torch.float64, bias_std: float = 0.1
) -> dict[str, torch.Tensor]:
    """n random networks of ``spec`` stacked as name -> (n, *shape)."""
    g = torch.Generator().manual_seed(seed)
    torch_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        dicts = [build_model(spec).state_dict() for _ in range(n)]
    finally:
        torch.random.set_rng_state(torch_state)
    return {
        name: randomized(
            name, torch.stack([d[name] for d in dicts]), first.dim(), g, dtype, bias_std
        )
        for name, first in dicts[0].items()
    }


def randomized(name, t, dim, g, dtype, bias_std) -> torch.Tensor:
    """The tensor ``name`` of the recipe above (``dim``: its dimension in one network): conv
    and linear weights kept, biases, running statistics and BatchNorm gammas drawn."""
    if not t.is_floating_point():
        return t
    shape = t.shape
    if name.endswith("running_var"):
        t = 0.5 + torch.rand(shape, generator=g, dtype=dtype)
    elif name.endswith("running_mean") or name.endswith(".bias"):
        t = bias_std * torch.randn(shape, generator=g, dtype=dtype)
    elif dim == 1:  # BatchNorm gamma: either sign, away from zero
        sign = torch.where(torch.rand(shape, generator=g) < 0.2, -1.0, 1.0).to(dtype)
        t = sign * (0.5 + torch.rand(shape, generator=g, dtype=dtype))
    return t.to(dtype)
