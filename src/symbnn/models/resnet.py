"""ResNet-18: torchvision's network, with a choice of stem.

- ``stem="cifar"`` (the default): a 3x3 stride-1 convolution and no max-pool, for 32x32 inputs;
- ``stem="imagenet"``: torchvision's own 7x7 stride-2 convolution and 3x3 max-pool (the stem
  TorchUncertainty's "imagenet" style uses, e.g. for TinyImageNet).

State-dict names are torchvision's (conv1, bn1, layer1.0.conv1, ..., fc), so checkpoints
from torchvision-based code load directly.
"""

from __future__ import annotations

from typing import Literal

from torch import nn

STEMS = ("cifar", "imagenet")


def resnet18_cifar(
    num_classes: int = 100, in_channels: int = 3, stem: Literal["cifar", "imagenet"] = "cifar"
) -> nn.Module:
    if stem not in STEMS:
        raise ValueError(f"stem {stem!r} is not one of {', '.join(STEMS)}")
    # imported here: torchvision takes about 1.5 s to import, which every workflow job that
    # never builds a ResNet would otherwise pay
    from torchvision.models import resnet18

    model = resnet18(weights=None, num_classes=num_classes)
    if stem == "cifar":
        model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    elif in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return model
