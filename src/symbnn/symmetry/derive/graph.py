"""Tracing a model into a torch.fx graph with every tensor's shape, and reading its nodes."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

from symbnn.models import MLP, OptuNet
from symbnn.symmetry.derive.tables import CONV


def is_tensor(node: Any) -> bool:
    return isinstance(node, fx.Node) and isinstance(node.meta.get("tensor_meta"), TensorMetadata)


def shape(node: fx.Node) -> tuple[int, ...]:
    return tuple(node.meta["tensor_meta"].shape)


def location(node: fx.Node) -> str:
    if node.op == "call_module":
        return str(node.target)
    stack = node.meta.get("nn_module_stack") or {}
    module = next(reversed(stack), None) if stack else None
    name = getattr(node.target, "__name__", str(node.target))
    return f"{module}.{name}" if module else name


def tensor_inputs(node: fx.Node) -> list[fx.Node]:
    return [n for n in node.all_input_nodes if is_tensor(n)]


def default_input(model: nn.Module) -> torch.Tensor:
    """A batch of 2 inputs the model probably accepts: the shipped models' own input sizes,
    else 32 x 32 (x 32) maps with the first conv's channels, or the first linear's features."""
    p = next((p for p in model.parameters() if p.is_floating_point()), None)
    kw = {
        "dtype": p.dtype if p is not None else torch.float32,
        "device": getattr(p, "device", None),
    }
    if isinstance(model, MLP):
        return torch.randn(2, model.widths[0], **kw)
    if isinstance(model, OptuNet):
        return torch.randn(2, model.conv1.in_channels, 28, 28, **kw)
    for m in model.modules():
        if isinstance(m, CONV):
            k = len(m.kernel_size)
            return torch.randn(2, m.in_channels, *([32] * k), **kw)
        if isinstance(m, nn.Linear):
            return torch.randn(2, m.in_features, **kw)
    raise ValueError(f"cannot guess an input for {type(model).__name__}: pass example_input")


def is_filter_response_norm(m: nn.Module) -> bool:
    """A filter response normalisation with its TLU: symbnn's (`symbnn.models.frn`) or
    TorchUncertainty's, told by name and parameters (tau, beta, gamma of shape (1, C, 1, ...))."""
    # m._parameters, not getattr: while tracing, attribute access yields proxies
    return "FilterResponseNorm" in type(m).__name__ and all(
        m._parameters.get(name) is not None for name in ("tau", "beta", "gamma")
    )


class _Tracer(fx.Tracer):
    """torch.fx's tracer, with filter response normalisations kept whole (one node), as
    torch.nn's own layers are."""

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return is_filter_response_norm(m) or super().is_leaf_module(m, qualname)


def trace(model: nn.Module, example_input=None) -> fx.GraphModule:
    """The model's torch.fx graph, every tensor's shape recorded (``node.meta['tensor_meta']``)
    by one eval-mode pass of ``example_input`` (a tensor or a tuple of positional inputs)."""
    if example_input is None:
        example_input = default_input(model)
    inputs = tuple(example_input) if isinstance(example_input, (tuple, list)) else (example_input,)
    p = next((p for p in model.parameters() if p.is_floating_point()), None)
    if p is not None:
        inputs = tuple(
            x.to(device=p.device, dtype=p.dtype if x.is_floating_point() else x.dtype)
            if isinstance(x, torch.Tensor)
            else x
            for x in inputs
        )
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        try:
            gm = fx.GraphModule(model, _Tracer().trace(model))
        except Exception as exc:
            raise ValueError(
                f"torch.fx cannot trace {type(model).__name__} ({type(exc).__name__}: {exc}); "
                f"its forward must not branch on tensor values"
            ) from exc
        with torch.no_grad():
            ShapeProp(gm).propagate(*inputs)
    finally:
        for m, mode in modes:
            m.training = mode
    return gm
