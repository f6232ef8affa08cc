"""What input a model spec takes, read from the spec (no model is built), so that a dataset
that does not fit is named before any training starts (`symbnn.data.validate.check_fits_model`).

- OptuNet: ``in_channels`` channels, and images at least as large as its convolution and
  pooling stack consumes: conv1 (kernel k1, no padding) leaves H - k1 + 1 rows, the max-pool
  (size and stride p) floor((H - k1 + 1) / p), and conv2 (kernel k2) needs k2 of them, so
  H >= p * k2 + k1 - 1 (18 with the defaults); ``num_classes`` outputs.
- MLP: C * H * W equal to its first width; its last width outputs.
- ResNet-18, ResNet-20: ``in_channels`` channels (any size: padded convolutions, global
  average pooling); ``num_classes`` outputs.
- a model named by import path: exactly its ``input_shape`` when the spec gives one.

An option the spec leaves out takes the architecture's own default, read from the builder's
signature (the one place defaults live).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from symbnn.models.mlp import MLP
from symbnn.models.optunet import OptuNet
from symbnn.models.resnet import resnet18_cifar
from symbnn.models.resnet20 import ResNet20FrnSilu
from symbnn.trust import is_import_path


@dataclass(frozen=True)
class InputRequirements:
    """What a model takes; None: no constraint known."""

    channels: int | None = None
    min_size: int | None = None  # smallest height and width
    features: int | None = None  # C * H * W of a model that flattens its input
    shape: tuple[int, ...] | None = None  # exactly this (C, H, W)
    outputs: int | None = None  # classes it predicts

    def mismatch(self, image_shape: tuple[int, ...], num_classes: int | None = None) -> str | None:
        """Why images of ``image_shape`` (C, H, W) (and ``num_classes`` classes, when given)
        do not fit; None when they do."""
        if self.shape is not None and tuple(image_shape) != tuple(self.shape):
            return f"takes inputs of shape {tuple(self.shape)} (its input_shape)"
        channels, *size = image_shape
        if self.channels is not None and channels != self.channels:
            return f"takes {self.channels} input channel(s) (in_channels)"
        if self.min_size is not None and min(size) < self.min_size:
            return (
                f"needs images of at least {self.min_size} x {self.min_size} (what its "
                "convolutions and pooling consume)"
            )
        if self.features is not None and math.prod(image_shape) != self.features:
            return (
                f"takes {self.features} input features (its first width), the images have "
                f"C * H * W = {math.prod(image_shape)}"
            )
        if num_classes is not None and self.outputs is not None and num_classes != self.outputs:
            return f"predicts {self.outputs} classes (num_classes or its last width)"
        return None


def _options(builder: Callable[..., Any], spec: dict[str, Any]) -> dict[str, Any]:
    """The builder's keyword defaults, overridden by the spec's options."""
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(builder).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }
    return {**defaults, **{k: v for k, v in spec.items() if k != "name" and v is not None}}


def input_requirements(spec: dict[str, Any]) -> InputRequirements:
    """What input (and how many classes) the model ``spec`` describes takes."""
    name = spec.get("name")
    if is_import_path(name):
        shape = spec.get("input_shape")
        return InputRequirements(shape=tuple(int(s) for s in shape) if shape else None)
    if name == "optunet":
        o = _options(OptuNet, spec)
        return InputRequirements(
            channels=o["in_channels"],
            min_size=o["pool"] * o["kernel2"] + o["kernel1"] - 1,
            outputs=o["num_classes"],
        )
    if name == "mlp":
        widths = [int(w) for w in _options(MLP, spec)["widths"]]
        return InputRequirements(features=widths[0], outputs=widths[-1])
    builders = {"resnet18": resnet18_cifar, "resnet20_frn_silu": ResNet20FrnSilu}
    if name in builders:
        o = _options(builders[name], spec)
        return InputRequirements(channels=o["in_channels"], outputs=o["num_classes"])
    raise ValueError(f"unknown model name {name!r}: its input is not known")
