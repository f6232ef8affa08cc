"""The symmetry structure of every model the project ships (MLP, OptuNet, ResNet-18).

``unit_groups(spec)`` is the one entry point; it builds the model once to read its shapes
and BatchNorm eps, then describes which axes of which tensors permute and scale together.
Models the project does not ship (named by import path) get the structure derived from
their traced graph (`symbnn.symmetry.derive`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import nn

from symbnn.models import MLP, OptuNet, build_model
from symbnn.symmetry.derive import symmetry_of
from symbnn.symmetry.structure import Axis, ScaleGroup, Symmetry, UnitGroup


def unit_groups(spec: dict[str, Any] | nn.Module) -> Symmetry:
    """Symmetry structure of a model given by its spec (``{"name": "optunet"}``, ...) or instance."""
    model = build_model(spec) if isinstance(spec, dict) else spec
    architecture = dict(spec) if isinstance(spec, dict) else {"name": type(model).__name__}
    shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    if isinstance(model, MLP):
        return _mlp(model, architecture, shapes)
    if isinstance(model, OptuNet):
        return _optunet(model, architecture, shapes)
    from torchvision.models import ResNet

    if isinstance(model, ResNet):
        return _resnet(model, architecture, shapes)
    # Any other model (one named by import path): its structure is derived from its traced
    # graph, which proves each symmetry it lists and leaves out what it cannot prove.

    return symmetry_of(model, architecture=architecture)


def _hidden(
    name: str,
    width: int,
    rows: str,
    bias: str | None,
    cols: str,
    blocks: int = 1,
    col_blocks: int = 1,
) -> UnitGroup:
    """A plain ReLU unit group: rows of ``rows`` in, ``cols`` columns out."""
    key = Axis(rows, 0, "in")
    axes = (
        key,
        *((Axis(bias, 0, "bias"),) if bias else ()),
        Axis(cols, 1, "out", blocks=col_blocks),
    )
    return UnitGroup(name, width, axes, (ScaleGroup(name, axes),), key, blocks=blocks)


def _softmax_layer(layer: str, shapes: dict) -> dict[str, str | None]:
    """``output_bias`` and ``output_weight`` of the output layer, which the softmax's additive
    freedom moves (b + c 1, W + 1 v^T). A single output is a regression or sigmoid logit:
    shifting it is not a symmetry."""
    return {
        f"output_{kind}": name if name in shapes and shapes[name][0] >= 2 else None
        for kind, name in (("bias", f"{layer}.bias"), ("weight", f"{layer}.weight"))
    }


def _mlp(model, architecture, shapes) -> Symmetry:
    n_layers = len(model.layers)
    has_bias = model.layers[0].bias is not None
    groups = tuple(
        _hidden(
            f"layers.{l}",
            model.widths[l + 1],
            f"layers.{l}.weight",
            f"layers.{l}.bias" if has_bias else None,
            f"layers.{l + 1}.weight",
        )
        for l in range(n_layers - 1)
    )
    return Symmetry(
        architecture,
        groups,
        shapes,
        mass_tensors=tuple(f"layers.{l}.weight" for l in range(n_layers)),
        **_softmax_layer(f"layers.{n_layers - 1}", shapes),
    )


def _optunet(model, architecture, shapes) -> Symmetry:
    g = model.conv2.groups
    groups = (
        # conv1's channels feed a grouped conv: they may only move block-wise (D.4.2).
        _hidden(
            "conv1",
            model.conv1.out_channels,
            "conv1.weight",
            None,
            "conv2.weight",
            blocks=g,
            col_blocks=g,
        ),
        # conv2's output channel o reads input block o // (out / g): its blocks move too.
        _hidden("conv2", model.conv2.out_channels, "conv2.weight", None, "fc1.weight", blocks=g),
        _hidden("fc1", model.fc1.out_features, "fc1.weight", "fc1.bias", "fc2.weight"),
    )
    return Symmetry(
        architecture,
        groups,
        shapes,
        couplings=(("conv1", "conv2"),) if g > 1 else (),
        mass_tensors=("conv1.weight", "conv2.weight", "fc1.weight", "fc2.weight"),
        **_softmax_layer("fc2", shapes),
    )


def _conv_bn(
    conv: str, bn: str, model_bn: nn.BatchNorm2d, has_bias: bool
) -> tuple[Axis, ScaleGroup, tuple[Axis, ...]]:
    """A conv followed by BatchNorm: the conv output channel's scale is absorbed by the running
    statistics (exactly, eps included); gamma and beta carry the BatchNorm output's scale."""
    row = Axis(f"{conv}.weight", 0, "in")
    absorbed = (
        row,
        *((Axis(f"{conv}.bias", 0, "bias"),) if has_bias else ()),
        Axis(f"{bn}.running_mean", 0, "bn_mean"),
        Axis(f"{bn}.running_var", 0, "bn_var", eps=float(model_bn.eps)),
    )
    affine = (Axis(f"{bn}.weight", 0, "bn_weight"), Axis(f"{bn}.bias", 0, "bn_bias"))
    return row, ScaleGroup(conv, absorbed, absorbed_by_bn=True), affine


@dataclass
class _Stream:
    """The channels of one residual stream: the convs whose outputs join its sum (``pre``:
    their scales, absorbed by BatchNorm), the BatchNorm affines that carry its scale, and the
    weights that read it (``consumers``)."""

    name: str
    width: int
    key: Axis
    pre: list[ScaleGroup]
    affine: list[Axis]
    consumers: list[Axis] = field(default_factory=list)

    @classmethod
    def start(cls, name: str, width: int, conv: str, bn: str, model_bn, has_bias: bool):
        key, pre, affine = _conv_bn(conv, bn, model_bn, has_bias)
        return cls(name, width, key, [pre], list(affine))

    def group(self) -> UnitGroup:
        post = ScaleGroup(self.name, (*self.affine, *self.consumers))
        axes = tuple(a for s in self.pre for a in s.axes) + post.axes
        return UnitGroup(self.name, self.width, axes, (*self.pre, post), self.key)


def _inner_group(p: str, block) -> UnitGroup:
    """The inner channels of a BasicBlock: conv1 -> bn1 -> relu -> conv2."""
    row1, pre1, affine1 = _conv_bn(
        f"{p}.conv1", f"{p}.bn1", block.bn1, block.conv1.bias is not None
    )
    post1 = ScaleGroup(p, (*affine1, Axis(f"{p}.conv2.weight", 1, "out")))
    return UnitGroup(p, block.conv1.out_channels, (*pre1.axes, *post1.axes), (pre1, post1), row1)


def _resnet(model, architecture, shapes) -> Symmetry:
    from torchvision.models.resnet import BasicBlock

    groups: list[UnitGroup] = []
    mass = ["conv1.weight", "bn1.weight"]
    stream = _Stream.start(
        "layer1", model.conv1.out_channels, "conv1", "bn1", model.bn1, model.conv1.bias is not None
    )
    inner: list[UnitGroup] = []
    for stage in range(1, 5):
        for b, block in enumerate(getattr(model, f"layer{stage}")):
            if not isinstance(block, BasicBlock):
                raise ValueError(
                    f"only BasicBlock ResNets are described, got {type(block).__name__}"
                )
            p = f"layer{stage}.{b}"
            if block.downsample is not None:
                # A projection shortcut ends the residual stream: a new channel group starts.
                stream.consumers += [
                    Axis(f"{p}.conv1.weight", 1, "out"),
                    Axis(f"{p}.downsample.0.weight", 1, "out"),
                ]
                groups += [stream.group(), *inner]
                inner = []
                stream = _Stream.start(
                    f"layer{stage}",
                    block.conv2.out_channels,
                    f"{p}.downsample.0",
                    f"{p}.downsample.1",
                    block.downsample[1],
                    block.downsample[0].bias is not None,
                )
                mass += [f"{p}.downsample.0.weight", f"{p}.downsample.1.weight"]
            else:
                stream.consumers.append(Axis(f"{p}.conv1.weight", 1, "out"))
            inner.append(_inner_group(p, block))
            # conv2 -> bn2 joins the residual sum: its channels are the stream's.
            _, pre2, affine2 = _conv_bn(
                f"{p}.conv2", f"{p}.bn2", block.bn2, block.conv2.bias is not None
            )
            stream.pre.append(pre2)
            stream.affine += list(affine2)
            mass += [f"{p}.conv1.weight", f"{p}.bn1.weight", f"{p}.conv2.weight", f"{p}.bn2.weight"]
    stream.consumers.append(Axis("fc.weight", 1, "out"))
    groups += [stream.group(), *inner]
    mass.append("fc.weight")
    return Symmetry(
        architecture,
        tuple(groups),
        shapes,
        mass_tensors=tuple(mass),
        **_softmax_layer("fc", shapes),
    )
