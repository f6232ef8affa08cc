"""ResNet-20 with filter response normalisation and SiLU: the paper's authors' CIFAR-10
network (released as ``cifar10-resnet20-frn-silu``), built as TorchUncertainty builds it
(``resnet(arch=20, style="cifar", normalization_layer=FilterResponseNorm2d,
activation_fn=silu)``), with its state-dict names: conv1, bn1 (an FRN), layer{1,2,3}.{0,1,2}
.{conv1,bn1,conv2,bn2,shortcut.0,shortcut.1}, linear.

SiLU is not positively homogeneous and FRN normalises its input, so the network has
permutation symmetries (channels, tied along each residual stream) and no scaling ones."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from symbnn.models.frn import FilterResponseNorm2d


class _Block(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = FilterResponseNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = FilterResponseNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                FilterResponseNorm2d(planes),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.silu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.silu(out + self.shortcut(x))


class ResNet20FrnSilu(nn.Module):
    def __init__(self, num_classes: int = 10, in_channels: int = 3, width: int = 16) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 3, stride=1, padding=1, bias=False)
        self.bn1 = FilterResponseNorm2d(width)
        planes, layers = width, []
        for stage in range(3):
            stride = 1 if stage == 0 else 2
            out_planes = width * 2**stage
            blocks = [_Block(planes, out_planes, stride)]
            blocks += [_Block(out_planes, out_planes, 1) for _ in range(2)]
            layers.append(nn.Sequential(*blocks))
            planes = out_planes
        self.layer1, self.layer2, self.layer3 = layers
        self.linear = nn.Linear(planes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.silu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        return self.linear(out.mean(dim=(2, 3)))
