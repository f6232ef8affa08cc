"""OptuNet: the paper's tiny MNIST CNN with a grouped second convolution (docs/maths.md, section 4).

The paper's exact 392-parameter definition is unpublished; this is the close public
relative docs/maths.md, section 4, describes (355 parameters with the defaults).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class OptuNet(nn.Module):
    def __init__(
        self,
        in_channels: int = 1,
        num_classes: int = 10,
        conv1_channels: int = 2,
        conv2_channels: int = 10,
        kernel1: int = 4,
        kernel2: int = 5,
        groups: int = 2,
        pool: int = 3,
        hidden: int = 3,
    ) -> None:
        super().__init__()
        if conv1_channels % groups or conv2_channels % groups:
            raise ValueError(
                f"groups={groups} must divide conv1_channels={conv1_channels} "
                f"and conv2_channels={conv2_channels}"
            )
        self.pool_size = pool
        self.conv1 = nn.Conv2d(in_channels, conv1_channels, kernel1, bias=False)
        self.conv2 = nn.Conv2d(conv1_channels, conv2_channels, kernel2, groups=groups, bias=False)
        self.fc1 = nn.Linear(conv2_channels, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), self.pool_size, self.pool_size)
        x = F.relu(self.conv2(x)).mean(dim=(2, 3))  # global average pool
        return self.fc2(F.relu(self.fc1(x)))
