"""Seeds -> explicit random streams, and model initialisation that draws only from them.

Seed s owns three independent streams (initial weights, data order, augmentation), each a
`torch.Generator` seeded from (s, stream) through numpy's SeedSequence. Nothing here reads
the global RNG, so a seed's run does not depend on what ran before it in the process.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from symbnn.models import build_model
from symbnn.models.frn import FilterResponseNorm2d

STREAMS = ("init", "order", "augment")


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seeds must be non-negative integers, got {seed!r}")
    return int(seed)


def seed_generator(seed: int, stream: str) -> torch.Generator:
    """A CPU generator for one (seed, stream) pair; streams of one seed are independent."""
    if stream not in STREAMS:
        raise ValueError(f"unknown random stream {stream!r} (known: {', '.join(STREAMS)})")
    entropy = np.random.SeedSequence([check_seed(seed), STREAMS.index(stream)])
    state = int(entropy.generate_state(1, dtype=np.uint64)[0]) >> 1  # manual_seed takes < 2**63
    return torch.Generator().manual_seed(state)


def _is_torchvision_resnet(model: nn.Module) -> bool:
    return any(
        cls.__name__ == "ResNet" and cls.__module__.startswith("torchvision")
        for cls in type(model).__mro__
    )


@torch.no_grad()
def init_parameters(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Redraw every parameter with the distribution its module's constructor uses, from
    `generator`: PyTorch's default for Linear/Conv (uniform, bound 1/sqrt(fan_in)), torchvision
    ResNet's kaiming-normal (fan_out) convs, ones/zeros for normalisation layers (filter
    response normalisation included). A module
    type with parameters not listed here raises, rather than keeping global-RNG weights."""
    conv_fan_out = _is_torchvision_resnet(model)
    for name, module in model.named_modules():
        own = dict(module.named_parameters(recurse=False))
        if not own:
            continue
        if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            if conv_fan_out and not isinstance(module, nn.Linear):
                nn.init.kaiming_normal_(
                    module.weight, mode="fan_out", nonlinearity="relu", generator=generator
                )
            else:
                nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
            if module.bias is not None:
                fan_in = module.weight[0].numel()
                bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
                nn.init.uniform_(module.bias, -bound, bound, generator=generator)
        elif isinstance(module, (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm)):
            for tensor_name, tensor in own.items():
                tensor.fill_(1.0 if tensor_name == "weight" else 0.0)
        elif isinstance(module, FilterResponseNorm2d):  # the identity scale, no shift or floor
            for tensor_name, tensor in own.items():
                tensor.fill_(1.0 if tensor_name == "gamma" else 0.0)
        else:
            raise TypeError(
                f"init_parameters: no seeded initialiser for module {name!r} "
                f"of type {type(module).__name__}"
            )
    return model


def build_seeded_model(model_spec: dict[str, Any], seed: int) -> nn.Module:
    """The model `model_spec` describes, with seed `seed`'s initial weights (on the CPU)."""
    # the constructor draws from the global RNG; fork_rng puts its state back afterwards,
    # and every parameter is redrawn from the seed's own stream anyway
    with torch.random.fork_rng(devices=[]):
        model = build_model(model_spec)
    return init_parameters(model, seed_generator(seed, "init"))
