"""Models the project ships, built from a plain-dict spec so that stores can record them.

A spec is what `config.yaml` and a store's `architecture` attribute hold, e.g.
``{"name": "optunet"}``, ``{"name": "mlp", "widths": [784, 256, 256, 10]}`` or
``{"name": "resnet18", "num_classes": 100}``; a model of the user's own is named by import
path: ``{"name": "mypackage.nets:SmallCNN", "options": {"width": 16}, "input_shape":
[1, 28, 28]}`` (see `symbnn.models.imported`).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from symbnn.models.imported import build_imported, example_input
from symbnn.models.inputs import InputRequirements, input_requirements
from symbnn.models.mlp import MLP
from symbnn.models.optunet import OptuNet
from symbnn.models.resnet import resnet18_cifar
from symbnn.models.resnet20 import ResNet20FrnSilu
from symbnn.trust import is_import_path

_BUILDERS = {
    "optunet": OptuNet,
    "mlp": MLP,
    "resnet18": resnet18_cifar,
    "resnet20_frn_silu": ResNet20FrnSilu,
}

MODEL_NAMES = tuple(_BUILDERS)


def build_model(spec: dict[str, Any]) -> nn.Module:
    """Instantiate the model a spec describes (weights freshly initialised)."""
    if "name" not in spec:
        raise ValueError(f"model spec {spec!r} has no 'name' key")
    name = spec["name"]
    if is_import_path(name):
        return build_imported(spec)
    if name not in _BUILDERS:
        raise ValueError(f"unknown model name {name!r} (known: {', '.join(MODEL_NAMES)})")
    kwargs = {k: v for k, v in spec.items() if k != "name"}
    try:
        return _BUILDERS[name](**kwargs)
    except TypeError as exc:
        raise ValueError(f"bad arguments for model {name!r}: {exc}") from exc


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (BatchNorm running statistics excluded)."""
    return sum(p.numel() for p in model.parameters())


__all__ = [
    "MLP",
    "OptuNet",
    "resnet18_cifar",
    "build_model",
    "count_parameters",
    "example_input",
    "input_requirements",
    "InputRequirements",
    "is_import_path",
    "MODEL_NAMES",
]
