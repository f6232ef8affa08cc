"""A plain ReLU multilayer perceptron of any widths (input is flattened)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, widths: Sequence[int] = (784, 256, 256, 10), bias: bool = True) -> None:
        super().__init__()
        widths = [int(w) for w in widths]
        if len(widths) < 2 or min(widths) < 1:
            raise ValueError(
                f"MLP widths must list at least an input and an output width >= 1, got {widths}"
            )
        self.widths = widths
        self.layers = nn.ModuleList(
            nn.Linear(n_in, n_out, bias=bias) for n_in, n_out in zip(widths[:-1], widths[1:])
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)
