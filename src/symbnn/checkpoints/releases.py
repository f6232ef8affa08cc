"""The settings the paper's authors released (the "Checkpoints" dataset of the Hugging Face
organisation torch-uncertainty) and how each maps onto a symbnn model.

A released network is a safetensors file of TorchUncertainty's parameter names. Each release
knows the symbnn architecture its networks load into and the renames from symbnn's names to
TorchUncertainty's (the mapping runs from the model's own state_dict, so every name symbnn
expects has exactly one source name, and a file's unknown keys are whatever is left).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

# Where the released files live on the Hugging Face hub.
HUB_REPOSITORY = "torch-uncertainty/Checkpoints"
HUB_REPOSITORY_TYPE = "dataset"

# Buffers that carry no weight: absent ones are filled (BatchNorm's step counter, which only
# matters when momentum is None), never reported missing.
OPTIONAL_BUFFERS = ("num_batches_tracked",)

# torchvision's ResNet names -> TorchUncertainty's (torch_uncertainty.models.resnet): the
# projection shortcut is `shortcut` there, the classifier `linear`.
RESNET_RENAMES = (
    (r"^(layer\d+\.\d+)\.downsample\.", r"\1.shortcut."),
    (r"^fc\.", "linear."),
)


class CheckpointError(ValueError):
    """A released file or bundle cannot be imported; the message names it and what is wrong."""


@dataclasses.dataclass(frozen=True)
class Release:
    name: str  # the setting's folder in the dataset: models/<name>/<name>-<first>-<last>.tgz
    description: str
    architecture: dict[str, Any]  # symbnn model spec (before `resolve`)
    renames: tuple[tuple[str, str], ...] = ()

    def source_name(self, name: str) -> str:
        """The TorchUncertainty name of symbnn state_dict entry ``name``."""
        for pattern, replacement in self.renames:
            name = re.sub(pattern, replacement, name)
        return name

    def resolve(self, tensors: Mapping[str, np.ndarray], where: str) -> dict[str, Any]:
        """The architecture of a network whose (source-named) tensors are ``tensors``: for a
        ResNet-18 the stem is read from conv1's kernel (TorchUncertainty's "cifar" style has
        a 3x3 stem and no max-pool, its "imagenet" style a 7x7 stem and a max-pool)."""
        spec = dict(self.architecture)
        if spec["name"] == "resnet18":
            if "conv1.weight" not in tensors:
                raise CheckpointError(f"{where}: no conv1.weight, so not a {self.name} network")
            kernel = tuple(tensors["conv1.weight"].shape[2:])
            stems = {(3, 3): "cifar", (7, 7): "imagenet"}
            if kernel not in stems:
                raise CheckpointError(
                    f"{where}: conv1.weight has a {kernel} kernel; a ResNet-18 stem has 3x3 "
                    "(cifar style) or 7x7 (imagenet style)"
                )
            if stems[kernel] != "cifar":
                spec["stem"] = stems[kernel]
        return spec


RELEASES: dict[str, Release] = {
    release.name: release
    for release in (
        Release(
            "mnist-optunet",
            "OptuNets (OptuMNIST-v1: conv1 2x1x4x4, max-pool 3, grouped conv2 10x1x5x5, "
            "global average pool, fc1 10->3, fc2 3->10) trained on MNIST",
            # symbnn's OptuNet defaults are OptuMNIST-v1, with the same parameter names
            {"name": "optunet"},
        ),
        Release(
            "cifar10-resnet18",
            "ResNet-18s trained on CIFAR-10",
            {"name": "resnet18", "num_classes": 10},
            RESNET_RENAMES,
        ),
        Release(
            "cifar100-resnet18",
            "ResNet-18s trained on CIFAR-100",
            {"name": "resnet18", "num_classes": 100},
            RESNET_RENAMES,
        ),
        Release(
            "cifar10-resnet20-frn-silu",
            "ResNet-20s with filter response normalisation and SiLU trained on CIFAR-10 "
            "(permutation symmetries only: SiLU and FRN admit no scaling)",
            # symbnn's ResNet20FrnSilu keeps TorchUncertainty's names
            {"name": "resnet20_frn_silu", "num_classes": 10},
        ),
        Release(
            "tiny-imagenet-resnet18",
            "ResNet-18s trained on TinyImageNet (200 classes)",
            {"name": "resnet18", "num_classes": 200},
            RESNET_RENAMES,
        ),
    )
}


def release(name: str) -> Release:
    if name not in RELEASES:
        raise CheckpointError(f"unknown released setting {name!r} (known: {', '.join(RELEASES)})")
    return RELEASES[name]
