"""ResNet-18 for 32x32 inputs: torchvision's network with a 3x3 stride-1 stem and no max-pool.

State-dict names are torchvision's (conv1, bn1, layer1.0.conv1, ..., fc), so checkpoints
from torchvision-based code load directly.
"""

from __future__ import annotations

from torch import nn
from torchvision.models import resnet18


def resnet18_cifar(num_classes: int = 100, in_channels: int = 3) -> nn.Module:
    model = resnet18(weights=None, num_classes=num_classes)
    model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model
