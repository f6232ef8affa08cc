"""Derive a network's symmetry structure from its computation graph ("bring your own network").

``symmetry_of(model, example_input)`` traces the model with ``torch.fx`` (module-level graph:
Conv, Linear, BatchNorm, activations and pooling stay single nodes, functional calls such as
``torch.cat`` or ``+`` appear as such), runs the example input through it once in eval mode
to learn every tensor's shape, and follows the units through the graph. The result is a
`Symmetry` of the kind `symbnn.symmetry.architectures` writes by hand (for the shipped models
the two are equal up to group names: `structure_differences`).

How the units are followed. Every conv or linear layer creates a *unit space* (its output
channels) and a *scale space* (a positive scale per channel, carried by its rows and bias).
Each traced value records, along its channel axis, which spaces its channels belong to (a
list of segments: one per concatenated input; a segment also knows how many consecutive
entries each unit owns after a C x H x W map is flattened). Operations act on the spaces:

* elementwise activations and pooling pass the spaces on; positively homogeneous ones (ReLU,
  LeakyReLU, identity, dropout, max/avg pooling, means, flatten) pass the scale space too,
  the others (ReLU6, SiLU, GELU, tanh, sigmoid, softmax, ...) end it: no scaling through them;
* a residual sum unites the spaces of its operands (tied channels, one shared scale);
* a concatenation keeps each slice's own spaces (DenseNet: every layer's channels stay a
  group of their own while later layers read them side by side);
* BatchNorm (eval mode) moves its running statistics, gamma and beta with each channel; the
  statistics absorb the incoming scale space exactly (mean by s, var + eps by s^2), and gamma
  and beta start a new one;
* a grouped convolution lets its input channels move only as blocks, and its output's blocks
  only as the input's blocks (a *coupling*); depthwise convolutions are the case of
  one-channel blocks;
* a consuming conv or linear undoes both: its columns (a slice of them after a
  concatenation, ``inner`` entries per unit after a flatten) move and scale inversely;
* the network's input and output are fixed: no space touching them moves.

What the tracer cannot follow is treated as not symmetric: an unknown module or function, a
reshape that mixes units, a product of two tensors, ... fixes every space it reads (no
permutation, no scaling) and is reported in ``Symmetry.limits`` as (module, reason); an
activation that is not positively homogeneous ends the scale spaces through it and is
reported too. Spaces the output reaches are fixed silently (the natural boundary). The last
layer's bias carries the softmax shift (``output_bias``) when that layer has at least two
outputs and reaches the output only through shift-transparent steps (dropout, identity,
reshape, pooling, softmax / log-softmax). Its weight carries the rest of the softmax's
additive freedom (``output_weight``: W + 1 v^T moves every logit by v . h) when the layer is
a linear layer with one feature axis (batch, features) and no pooling follows it: the shift
v . h then depends on the sample only. A convolution's v . h varies over positions, which
max pooling or a flatten would not treat alike, so a convolutional last layer keeps its
weight out (its bias shift is still found).

Scales are eval-mode statements (BatchNorm with running statistics), like the hand-written
structures. The sorting key of a group is the rows of its shallowest producer (the stem or
the projection conv of a residual stream), as in `symbnn.symmetry.architectures`.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from symbnn.models import example_input as spec_input
from symbnn.symmetry.derive.assemble import structure
from symbnn.symmetry.derive.compare import structure_differences
from symbnn.symmetry.derive.graph import default_input, trace
from symbnn.symmetry.derive.walk import Walk
from symbnn.symmetry.structure import Symmetry

__all__ = ["default_input", "structure_differences", "symmetry_of", "trace"]


def symmetry_of(
    model: nn.Module, example_input=None, *, architecture: dict[str, Any] | None = None
) -> Symmetry:
    """The symmetry structure of ``model`` derived from its traced graph (module docstring).

    ``example_input``: a batch the model accepts (a tensor, or a tuple of positional
    inputs); only shapes matter, and they matter where a feature map is flattened into a
    linear layer. By default a batch of the ``architecture`` spec's ``input_shape``
    (`symbnn.models.example_input`), else `default_input`'s guess; use a batch of at least 2.
    ``architecture`` is recorded in the result (default ``{"name": <class name>}``).
    What could not be proven symmetric is listed in the result's ``limits``.
    """
    if example_input is None and architecture is not None:
        example_input = spec_input(architecture, model)
    gm = trace(model, example_input)
    state = model.state_dict(keep_vars=True)
    names_of: dict[int, list[str]] = {}
    for name, t in state.items():
        names_of.setdefault(id(t), []).append(name)
    aliased = {n for names in names_of.values() if len(names) > 1 for n in names}
    walk = Walk(gm, set(state), aliased)
    walk.run()
    shapes = {name: tuple(t.shape) for name, t in state.items()}
    return structure(walk, architecture or {"name": type(model).__name__}, shapes)
