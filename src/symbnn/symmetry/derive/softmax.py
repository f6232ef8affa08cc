"""The softmax's additive freedom: the bias (and weight) of the layer producing the output,
where a common shift of the logits reaches the softmax unchanged (`symbnn.symmetry.derive`)."""

from __future__ import annotations

import torch
from torch import fx, nn
from torch.nn import functional as F

from symbnn.symmetry.derive import tables
from symbnn.symmetry.derive.graph import is_tensor, shape


def softmax_layer(
    gm: fx.GraphModule, producers: dict[fx.Node, tuple[str, nn.Module]], node: fx.Node
) -> tuple[str | None, str | None]:
    """(bias, weight) of the layer producing the output, where the softmax over its
    outputs is invariant to a common shift of the logits: b + c 1 through
    shift-transparent steps only; W + 1 v^T also needs a linear layer with one feature
    axis and no pooling after it (see `symbnn.symmetry.derive`'s docstring)."""
    pooled = False
    while True:
        if len(node.users) != 1:
            return None, None
        if node in producers:
            where, m = producers[node]
            out = m.out_features if isinstance(m, nn.Linear) else m.out_channels
            if out < 2:
                return None, None
            flat = isinstance(m, tables.LINEAR) and len(shape(node)) == 2 and not pooled
            return (
                f"{where}.bias" if m.bias is not None else None,
                f"{where}.weight" if flat else None,
            )
        if not _shift_transparent(gm, node) or not is_tensor(node.args[0]):
            return None, None
        pooled = pooled or _pools(gm, node)
        node = node.args[0]


def _pools(gm: fx.GraphModule, node: fx.Node) -> bool:
    if node.op == "call_module":
        kind = type(gm.get_submodule(node.target))
        return kind in tables.POOL_MODULES
    return node.op == "call_function" and node.target in tables.POOL_FUNCTIONS


def _shift_transparent(gm: fx.GraphModule, node: fx.Node) -> bool:
    """Steps that turn a uniform shift of their input into a uniform shift of their output
    (softmax: into none)."""
    t = node.target
    if node.op == "call_module":
        m = gm.get_submodule(t)
        kind = type(m)
        if kind in (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d):  # zeros counted in a mean
            return not (m.count_include_pad and any(tables.as_tuple(m.padding)))
        return kind in (
            *tables.DROPOUT,
            nn.Identity,
            nn.Softmax,
            nn.LogSoftmax,
            *tables.RESHAPE_MODULES,
        ) or (kind in tables.POOL_MODULES)
    if node.op == "call_method":
        return t in tables.RESHAPE_METHODS | {"softmax", "log_softmax", "contiguous", "clone"}
    return t in tables.RESHAPE_FUNCTIONS | tables.SHIFT_FREE_POOLS | {
        F.dropout,
        F.softmax,
        F.log_softmax,
        torch.softmax,
        torch.log_softmax,
    }
