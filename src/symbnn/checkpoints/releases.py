"""The settings the paper's authors released (the "Checkpoints" dataset of the Hugging Face
organisation torch-uncertainty): where they live, and a release looked up and resolved for
its files.

A released network is a safetensors file of TorchUncertainty's parameter names. Each release
(`symbnn.settings.checkpoints.RELEASES`, in the settings layer, which checks a configuration's
model against it) knows the symbnn architecture its networks load into and the renames from
symbnn's names to TorchUncertainty's (the mapping runs from the model's own state_dict, so
every name symbnn expects has exactly one source name, and a file's unknown keys are whatever
is left).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from symbnn.settings.checkpoints import RELEASES, Release

# Where the released files live on the Hugging Face hub.
HUB_REPOSITORY = "torch-uncertainty/Checkpoints"
HUB_REPOSITORY_TYPE = "dataset"

# Buffers that carry no weight: absent ones are filled (BatchNorm's step counter, which only
# matters when momentum is None), never reported missing.
OPTIONAL_BUFFERS = ("num_batches_tracked",)


class CheckpointError(ValueError):
    """A released file or bundle cannot be imported; the message names it and what is wrong."""


def release(name: str) -> Release:
    if name not in RELEASES:
        raise CheckpointError(f"unknown released setting {name!r} (known: {', '.join(RELEASES)})")
    return RELEASES[name]


def architecture_of(
    release: Release, tensors: Mapping[str, np.ndarray], where: str
) -> dict[str, Any]:
    """The architecture of a ``release``'s network whose (source-named) tensors are
    ``tensors``: for a ResNet-18 the stem is read from conv1's kernel (TorchUncertainty's
    "cifar" style has a 3x3 stem and no max-pool, its "imagenet" style a 7x7 stem and a
    max-pool)."""
    spec = dict(release.architecture)
    if spec["name"] == "resnet18":
        if "conv1.weight" not in tensors:
            raise CheckpointError(f"{where}: no conv1.weight, so not a {release.name} network")
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
