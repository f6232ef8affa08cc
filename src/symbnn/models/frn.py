"""Filter response normalisation with a thresholded linear unit (Singh & Krishnan, CVPR 2020),
as TorchUncertainty implements it (parameters tau, beta, gamma of shape (1, C, 1, 1), eps
1e-6), so its state-dict entries load unchanged:

    y = max(gamma * x / sqrt(mean_{h,w}(x^2) + eps) + beta, tau)

Each channel is normalised by its own mean square over the spatial positions of one image:
no batch statistics, the same in training and evaluation."""

from __future__ import annotations

import torch
from torch import nn


class FilterResponseNorm2d(nn.Module):
    def __init__(self, num_channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        shape = (1, num_channels, 1, 1)
        self.num_channels = num_channels
        self.eps = eps
        self.tau = nn.Parameter(torch.zeros(shape))
        self.beta = nn.Parameter(torch.zeros(shape))
        self.gamma = nn.Parameter(torch.ones(shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nu2 = x.pow(2).mean(dim=(2, 3), keepdim=True)
        x = x * torch.rsqrt(nu2 + self.eps)
        return torch.maximum(self.gamma * x + self.beta, self.tau)
