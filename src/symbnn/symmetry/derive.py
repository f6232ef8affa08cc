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

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata
from torch.nn import functional as F

from symbnn.symmetry.groups import INCOMING_ROLES, Axis, ScaleGroup, UnitGroup
from symbnn.symmetry.structure import Symmetry

# ------------------------------------------------------------------------- operation tables

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_LINEAR = (nn.Linear, nn.modules.linear.NonDynamicallyQuantizableLinear)
_BATCHNORM = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)
_DROPOUT = (
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.Dropout3d,
    nn.AlphaDropout,
    nn.FeatureAlphaDropout,
)
# positively homogeneous and channel-wise: permutations and positive scales pass
_HOMOGENEOUS_MODULES = (nn.ReLU, nn.LeakyReLU, nn.Identity, *_DROPOUT)
# channel-wise pooling over k trailing (spatial) axes
_POOL_MODULES = {
    nn.MaxPool1d: 1,
    nn.MaxPool2d: 2,
    nn.MaxPool3d: 3,
    nn.AvgPool1d: 1,
    nn.AvgPool2d: 2,
    nn.AvgPool3d: 3,
    nn.AdaptiveAvgPool1d: 1,
    nn.AdaptiveAvgPool2d: 2,
    nn.AdaptiveAvgPool3d: 3,
    nn.AdaptiveMaxPool1d: 1,
    nn.AdaptiveMaxPool2d: 2,
    nn.AdaptiveMaxPool3d: 3,
}
# elementwise (or symmetric across units) but not positively homogeneous: permutations only
_NONHOMOGENEOUS_MODULES = (
    nn.ReLU6,
    nn.Hardtanh,
    nn.SiLU,
    nn.GELU,
    nn.Tanh,
    nn.Sigmoid,
    nn.Hardswish,
    nn.Hardsigmoid,
    nn.ELU,
    nn.SELU,
    nn.CELU,
    nn.Softplus,
    nn.Mish,
    nn.LogSigmoid,
    nn.Softsign,
    nn.Tanhshrink,
    nn.Softshrink,
    nn.Hardshrink,
    nn.Threshold,
    nn.Softmax,
    nn.LogSoftmax,
    nn.Softmin,
    nn.Softmax2d,
)
_RESHAPE_MODULES = (nn.Flatten, nn.Unflatten)

_HOMOGENEOUS_FUNCTIONS = {
    F.relu,
    F.relu_,
    torch.relu,
    torch.relu_,
    F.leaky_relu,
    F.leaky_relu_,
    F.dropout,
    F.dropout1d,
    F.dropout2d,
    F.dropout3d,
    F.alpha_dropout,
    F.feature_alpha_dropout,
    torch.dropout,
    torch.abs,
    torch.clone,
    operator.pos,
}
_HOMOGENEOUS_METHODS = {
    "relu",
    "relu_",
    "abs",
    "contiguous",
    "clone",
    "detach",
    "to",
    "float",
    "double",
    "half",
    "type",
    "type_as",
}
_POOL_FUNCTIONS = {
    F.max_pool1d: 1,
    F.max_pool2d: 2,
    F.max_pool3d: 3,
    torch.max_pool1d: 1,
    torch.max_pool2d: 2,
    torch.max_pool3d: 3,
    F.avg_pool1d: 1,
    F.avg_pool2d: 2,
    F.avg_pool3d: 3,
    torch.avg_pool1d: 1,
    F.adaptive_avg_pool1d: 1,
    F.adaptive_avg_pool2d: 2,
    F.adaptive_avg_pool3d: 3,
    torch.adaptive_avg_pool1d: 1,
    F.adaptive_max_pool1d: 1,
    F.adaptive_max_pool2d: 2,
    F.adaptive_max_pool3d: 3,
}
# pooling functions that never average in padding zeros
_SHIFT_FREE_POOLS = {
    f for f in _POOL_FUNCTIONS if "max" in f.__name__ or "adaptive_avg" in f.__name__
}
_NONHOMOGENEOUS_FUNCTIONS = {
    F.relu6,
    F.hardtanh,
    F.hardtanh_,
    F.silu,
    F.gelu,
    F.elu,
    F.elu_,
    F.selu,
    F.celu,
    F.softplus,
    F.mish,
    F.hardswish,
    F.hardsigmoid,
    F.logsigmoid,
    F.softsign,
    F.tanhshrink,
    F.softshrink,
    F.hardshrink,
    F.sigmoid,
    F.tanh,
    F.softmax,
    F.log_softmax,
    F.softmin,
    torch.tanh,
    torch.sigmoid,
    torch.softmax,
    torch.log_softmax,
    torch.exp,
    torch.log,
    torch.sin,
    torch.cos,
    torch.square,
    torch.sqrt,
    torch.erf,
    torch.pow,
    torch.clamp,
    torch.clip,
}
_NONHOMOGENEOUS_METHODS = {
    "tanh",
    "tanh_",
    "sigmoid",
    "sigmoid_",
    "exp",
    "log",
    "sin",
    "cos",
    "square",
    "sqrt",
    "pow",
    "softmax",
    "log_softmax",
    "clamp",
    "clamp_",
    "clip",
}
_ADD = {operator.add, operator.iadd, torch.add, operator.sub, operator.isub, torch.sub}
_ADD_METHODS = {"add", "add_", "sub", "sub_"}
_MUL = {operator.mul, operator.imul, torch.mul}
_MUL_METHODS = {"mul", "mul_"}
_DIV = {operator.truediv, operator.itruediv, torch.div}
_DIV_METHODS = {"div", "div_"}
_NEG = {operator.neg, torch.neg}
_CAT = {torch.cat, torch.concat, torch.concatenate}
_RESHAPE_FUNCTIONS = {torch.flatten, torch.reshape, torch.squeeze, torch.unsqueeze}
_RESHAPE_METHODS = {"flatten", "view", "reshape", "squeeze", "unsqueeze", "view_as", "reshape_as"}
_TRANSPOSE = {torch.transpose, torch.permute, torch.t}
_TRANSPOSE_METHODS = {"transpose", "permute", "t"}
_REDUCE = {torch.mean, torch.sum, torch.amax}
_REDUCE_METHODS = {"mean", "sum", "amax"}
# read a tensor's metadata only: no effect on its units
_METADATA_METHODS = {"size", "dim", "numel", "type"}
# new tensors shaped like their input, not computed from it: no effect on its units
_SHAPED_LIKE = {
    torch.zeros_like,
    torch.ones_like,
    torch.empty_like,
    torch.full_like,
    torch.rand_like,
    torch.randn_like,
}
_SHAPED_LIKE_METHODS = {"new_zeros", "new_ones", "new_empty", "new_full"}

_FIXED = "tied to units that cannot move (the network input, or an operation not followed)"


# ------------------------------------------------------------------------- per-value layout


@dataclass(frozen=True)
class _Seg:
    """A run of channels along a value's channel axis, all from one unit space."""

    perm: int | None  # unit space; None: fixed units (network input, unknown origin)
    scale: int | None  # scale space; None: these units carry no free scale here
    width: int  # units
    inner: int = 1  # consecutive entries per unit (after a flatten)


@dataclass(frozen=True)
class _Layout:
    dim: int  # the channel axis of the (batched) value
    segs: tuple[_Seg, ...]

    @property
    def plain_channels(self) -> bool:
        return all(s.inner == 1 for s in self.segs)


@dataclass
class _Record:
    axis: Axis
    perm: int | None
    scale: int | None
    depth: int
    units: int


@dataclass
class _Spaces:
    """Union-find over unit spaces (with width, block constraint, fixed flag) and scale spaces
    (with killed flag and name)."""

    p_parent: list[int] = field(default_factory=list)
    p_width: list[int] = field(default_factory=list)
    p_blocks: list[int] = field(default_factory=list)
    p_fixed: list[bool] = field(default_factory=list)
    s_parent: list[int] = field(default_factory=list)
    s_killed: list[bool] = field(default_factory=list)
    s_name: list[str] = field(default_factory=list)

    def new_perm(self, width: int, blocks: int = 1) -> int:
        self.p_parent.append(len(self.p_parent))
        self.p_width.append(width)
        self.p_blocks.append(blocks)
        self.p_fixed.append(False)
        return len(self.p_parent) - 1

    def new_scale(self, name: str) -> int:
        self.s_parent.append(len(self.s_parent))
        self.s_killed.append(False)
        self.s_name.append(name)
        return len(self.s_parent) - 1

    @staticmethod
    def _find(parent: list[int], i: int) -> int:
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:
            parent[i], i = root, parent[i]
        return root

    def pfind(self, p: int) -> int:
        return self._find(self.p_parent, p)

    def sfind(self, s: int) -> int:
        return self._find(self.s_parent, s)

    def perm_alive(self, p: int | None) -> bool:
        return p is not None and not self.p_fixed[self.pfind(p)]

    def scale_alive(self, s: int | None) -> bool:
        return s is not None and not self.s_killed[self.sfind(s)]


# ------------------------------------------------------------------------- the derivation


class _Derivation:
    def __init__(self, gm: fx.GraphModule, state_names: set[str], aliased: set[str]) -> None:
        self.gm = gm
        self.state_names = state_names  # the model's state-dict entries
        self.aliased = aliased  # entries that are one tensor under several names
        self.spaces = _Spaces()
        self.env: dict[fx.Node, _Layout | None] = {}
        self.depth: dict[fx.Node, int] = {}
        self.records: list[_Record] = []
        self.claims: dict[tuple[str, int, int | None], int] = {}
        self.spans: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
        self.couplings: list[tuple[int, int]] = []
        self.limits: dict[tuple[str, str], None] = {}
        self.mass: dict[str, None] = {}
        self.producers: dict[fx.Node, tuple[str, nn.Module]] = {}
        self.output_bias: str | None = None
        self.output_weight: str | None = None

    # --------------------------------------------------------------- space operations

    def limit(self, where: str, reason: str) -> None:
        self.limits[(where, reason)] = None

    def fix(self, p: int | None) -> bool:
        """Fix a unit space; True if it could move before."""
        if not self.spaces.perm_alive(p):
            return False
        self.spaces.p_fixed[self.spaces.pfind(p)] = True
        return True

    def kill(self, s: int | None) -> bool:
        """End a scale space; True if it was free before."""
        if not self.spaces.scale_alive(s):
            return False
        self.spaces.s_killed[self.spaces.sfind(s)] = True
        return True

    def freeze(self, layout: _Layout | None, where: str, reason: str | None) -> None:
        """Fix every unit space and end every scale space of a value."""
        if layout is None:
            return
        changed = False
        for seg in layout.segs:
            changed |= self.fix(seg.perm)
            changed |= self.kill(seg.scale)
        if changed and reason:
            self.limit(where, reason)

    def unite_perm(self, a: int | None, b: int | None, where: str) -> int | None:
        sp = self.spaces
        if a is None or b is None:
            if self.fix(a if b is None else b):
                self.limit(where, _FIXED)
            return None
        ra, rb = sp.pfind(a), sp.pfind(b)
        if ra == rb:
            return ra
        root, other = min(ra, rb), max(ra, rb)
        sp.p_parent[other] = root
        blocks = {sp.p_blocks[ra], sp.p_blocks[rb]} - {1}
        fixed = sp.p_fixed[ra] or sp.p_fixed[rb]
        if sp.p_width[ra] != sp.p_width[rb] or len(blocks) > 1:
            if not fixed:
                self.limit(where, "ties units whose block structures (grouped convolutions) differ")
            fixed = True
        sp.p_blocks[root] = max(blocks, default=1)
        sp.p_fixed[root] = fixed
        return root

    def unite_scale(self, a: int | None, b: int | None, where: str) -> int | None:
        sp = self.spaces
        if a is None or b is None:
            if self.kill(a if b is None else b):
                self.limit(where, "adds units that carry no free scale to units that do")
            return None
        ra, rb = sp.sfind(a), sp.sfind(b)
        if ra != rb:
            root, other = min(ra, rb), max(ra, rb)
            sp.s_parent[other] = root
            sp.s_killed[root] = sp.s_killed[ra] or sp.s_killed[rb]
        return min(ra, rb)

    def constrain_blocks(self, p: int, blocks: int, where: str) -> None:
        sp = self.spaces
        r = sp.pfind(p)
        if sp.p_blocks[r] == 1:
            sp.p_blocks[r] = blocks
        elif sp.p_blocks[r] != blocks and self.fix(r):
            self.limit(where, f"reads units already split into {sp.p_blocks[r]} blocks in {blocks}")

    def claim(
        self, axis: Axis, perm: int | None, scale: int | None, units: int, where: str, depth=0
    ) -> None:
        """Tie ``axis`` to a unit space and scale space; a repeated claim (a module used
        twice) unites the spaces, an overlapping one fixes them."""
        key = (axis.tensor, axis.axis, axis.offset)
        if key in self.claims:
            old = self.records[self.claims[key]]
            if old.axis == axis and old.units == units:
                self.unite_perm(old.perm, perm, where)
                self.unite_scale(old.scale, scale, where)
            else:
                self._conflict(where, [old.perm, perm], [old.scale, scale])
            return
        start = axis.offset or 0
        stop = start + units // axis.blocks * axis.inner
        spans = self.spans.setdefault((axis.tensor, axis.axis), [])
        clash = [self.records[i] for lo, hi, i in spans if start < hi and lo < stop]
        if clash:
            self._conflict(
                where, [perm, *(r.perm for r in clash)], [scale, *(r.scale for r in clash)]
            )
            perm = scale = None
        spans.append((start, stop, len(self.records)))
        self.claims[key] = len(self.records)
        self.records.append(_Record(axis, perm, scale, depth, units))

    def _conflict(self, where: str, perms, scales) -> None:
        changed = any([self.fix(p) for p in perms] + [self.kill(s) for s in scales])
        if changed:
            self.limit(where, "is used twice with different channel layouts")

    # --------------------------------------------------------------- graph helpers

    @staticmethod
    def is_tensor(node: Any) -> bool:
        return isinstance(node, fx.Node) and isinstance(
            node.meta.get("tensor_meta"), TensorMetadata
        )

    @staticmethod
    def shape(node: fx.Node) -> tuple[int, ...]:
        return tuple(node.meta["tensor_meta"].shape)

    def where(self, node: fx.Node) -> str:
        if node.op == "call_module":
            return str(node.target)
        stack = node.meta.get("nn_module_stack") or {}
        module = next(reversed(stack), None) if stack else None
        name = getattr(node.target, "__name__", str(node.target))
        return f"{module}.{name}" if module else name

    def tensor_inputs(self, node: fx.Node) -> list[fx.Node]:
        return [n for n in node.all_input_nodes if self.is_tensor(n)]

    def layout(self, node: fx.Node) -> _Layout | None:
        return self.env.get(node)

    def segs_or_fixed(self, node: fx.Node, dim: int, where: str) -> tuple[_Seg, ...]:
        """A value's segments along ``dim``; one fixed segment for an opaque value (and for a
        layout along another axis, whose spaces are fixed)."""
        lay = self.layout(node)
        if lay is not None and lay.dim == dim:
            return lay.segs
        self.freeze(lay, where, "reads units along an axis other than their channel axis")
        return (_Seg(None, None, self.shape(node)[dim]),)

    # --------------------------------------------------------------- the walk

    def run(self) -> None:
        for node in self.gm.graph.nodes:
            inputs = node.all_input_nodes
            self.depth[node] = max((self.depth.get(n, 0) for n in inputs), default=0)
            if node.op in ("placeholder", "get_attr"):
                self.env[node] = None
            elif node.op == "output":
                self.output(node)
            elif node.op == "call_module":
                self.module(node, self.gm.get_submodule(node.target))
            else:
                self.function(node)

    def unknown(self, node: fx.Node, reason: str) -> None:
        """Fix whatever reaches a step not followed; its output has no symmetry either, so it
        is reported even when its inputs were fixed already."""
        for n in self.tensor_inputs(node):
            self.freeze(self.layout(n), self.where(node), None)
        self.limit(self.where(node), reason)
        self.env[node] = None

    def module(self, node: fx.Node, m: nn.Module) -> None:
        kind = type(m)
        if kind in (*_CONV, *_LINEAR, *_BATCHNORM, nn.LayerNorm):  # layers whose tensors move
            skip = getattr(m, "_non_persistent_buffers_set", set())
            tensors = (*m.named_parameters(recurse=False), *m.named_buffers(recurse=False))
            own = [f"{node.target}.{n}" for n, t in tensors if t is not None and n not in skip]
            if any(name not in self.state_names for name in own):
                self.unknown(node, "its parameters are not state-dict entries (reparametrised)")
                return
            if any(name in self.aliased for name in own):
                self.unknown(node, "its parameters are shared under several state-dict names")
                return
        if kind in _CONV:
            self.conv(node, m)
        elif kind in _LINEAR:
            self.linear(node, m)
        elif kind in _BATCHNORM:
            self.batchnorm(node, m)
        elif kind is nn.LayerNorm:
            self.layernorm(node, m)
        elif is_filter_response_norm(m):
            self.filter_response_norm(node, m)
        elif kind in _HOMOGENEOUS_MODULES or (kind is nn.PReLU and m.num_parameters == 1):
            self.env[node] = self.layout(node.args[0])
        elif kind in _POOL_MODULES and not getattr(m, "return_indices", False):
            self.pool(node, _POOL_MODULES[kind])
        elif kind in _NONHOMOGENEOUS_MODULES:
            self.nonhomogeneous(node, kind.__name__)
        elif kind in _RESHAPE_MODULES:
            self.reshape(node)
        else:
            self.unknown(node, f"unknown module type {kind.__name__}: treated as not symmetric")

    def function(self, node: fx.Node) -> None:
        t, method = node.target, node.op == "call_method"
        name = t if method else getattr(t, "__name__", str(t))
        if not self.tensor_inputs(node):
            self.env[node] = None
            return
        if not self.is_tensor(node) and (
            (method and t in _METADATA_METHODS)
            or t is getattr
            or (t is operator.getitem and not self.is_tensor(node.args[0]))
        ):
            self.env[node] = None  # shapes, sizes, dtypes: no effect on the units
            return
        if (t in _SHAPED_LIKE_METHODS) if method else (t in _SHAPED_LIKE):
            self.env[node] = None  # a new tensor: fixed units, its input untouched
            return
        if not self.is_tensor(node):
            self.unknown(node, f"{name} returns something other than a tensor: not followed")
        elif (t in _HOMOGENEOUS_METHODS) if method else _homogeneous_function(t):
            self.env[node] = self.layout(node.args[0])
        elif not method and t in _POOL_FUNCTIONS:
            self.pool(node, _POOL_FUNCTIONS[t])
        elif t in ("clamp", "clamp_", "clamp_min", "clamp_min_") if method else t is torch.clamp:
            self.clamp(node, name)
        elif (t in _NONHOMOGENEOUS_METHODS) if method else (t in _NONHOMOGENEOUS_FUNCTIONS):
            self.nonhomogeneous(node, name)
        elif (t in _ADD_METHODS) if method else (t in _ADD):
            self.add(node)
        elif (t in _MUL_METHODS | _DIV_METHODS) if method else (t in _MUL | _DIV):
            self.multiply(node, divide=(t in _DIV_METHODS) if method else (t in _DIV))
        elif (t == "neg") if method else (t in _NEG):
            self.env[node] = self.layout(node.args[0])
        elif not method and t in _CAT:
            self.cat(node)
        elif (t in _RESHAPE_METHODS) if method else (t in _RESHAPE_FUNCTIONS):
            self.reshape(node)
        elif (t in _TRANSPOSE_METHODS) if method else (t in _TRANSPOSE):
            self.transpose(node)
        elif (t in _REDUCE_METHODS) if method else (t in _REDUCE):
            self.reduce(node)
        else:
            self.unknown(node, f"unknown operation {name}: treated as not symmetric")

    # --------------------------------------------------------------- layers

    def _input_columns(self, node, weight: str, segs, where: str) -> None:
        single = len(segs) == 1
        offset = 0
        for seg in segs:
            axis = Axis(weight, 1, "out", offset=None if single else offset, inner=seg.inner)
            self.claim(axis, seg.perm, seg.scale, seg.width, where)
            offset += seg.width * seg.inner

    def _rows(self, node, m: nn.Module, out: int, blocks: int, dim: int) -> None:
        where = str(node.target)
        self.depth[node] += 1
        perm, scale = self.spaces.new_perm(out, blocks), self.spaces.new_scale(where)
        self.claim(Axis(f"{where}.weight", 0, "in"), perm, scale, out, where, self.depth[node])
        if getattr(m, "bias", None) is not None:
            self.claim(Axis(f"{where}.bias", 0, "bias"), perm, scale, out, where)
        self.mass[f"{where}.weight"] = None
        self.producers[node] = (where, m)
        self.env[node] = _Layout(dim, (_Seg(perm, scale, out),))

    def conv(self, node: fx.Node, m: nn.Conv1d | nn.Conv2d | nn.Conv3d) -> None:
        where, x = str(node.target), node.args[0]
        weight = f"{where}.weight"
        segs = self.segs_or_fixed(x, 1, where)
        if any(s.inner != 1 for s in segs):
            self.freeze(_Layout(1, segs), where, "convolves a flattened feature map")
            segs = (_Seg(None, None, m.in_channels),)
        g = m.groups
        if g == 1:
            self._input_columns(node, weight, segs, where)
            self._rows(node, m, m.out_channels, 1, 1)
            return
        if len(segs) > 1:
            self.freeze(_Layout(1, segs), where, "grouped convolution over a concatenation")
            segs = (_Seg(None, None, m.in_channels),)
        (seg,) = segs
        if seg.perm is not None:
            self.constrain_blocks(seg.perm, g, where)
        self.claim(Axis(weight, 1, "out", blocks=g), seg.perm, seg.scale, seg.width, where)
        self._rows(node, m, m.out_channels, g, 1)
        if seg.perm is not None:
            self.couplings.append((seg.perm, self.layout(node).segs[0].perm))

    def linear(self, node: fx.Node, m: nn.Linear) -> None:
        where, x = str(node.target), node.args[0]
        dim = len(self.shape(x)) - 1
        self._input_columns(node, f"{where}.weight", self.segs_or_fixed(x, dim, where), where)
        self._rows(node, m, m.out_features, 1, dim)

    def batchnorm(self, node: fx.Node, m: nn.modules.batchnorm._BatchNorm) -> None:
        where, x = str(node.target), node.args[0]
        segs = self.segs_or_fixed(x, 1, where)
        if not all(s.inner == 1 for s in segs):
            self.freeze(_Layout(1, segs), where, "normalises a flattened feature map")
            segs = (_Seg(None, None, m.num_features),)
        single, offset, out = len(segs) == 1, 0, []
        stats = m.track_running_stats and m.running_mean is not None
        for seg in segs:
            at = None if single else offset
            scale = None
            if m.affine and seg.perm is not None:
                scale = self.spaces.new_scale(
                    where if single else f"{where}[{offset}:{offset + seg.width}]"
                )
            tensors = []
            if stats:  # the statistics absorb the incoming scale (eval mode)
                tensors += [
                    ("running_mean", "bn_mean", seg.scale),
                    ("running_var", "bn_var", seg.scale),
                ]
            if m.affine:  # gamma and beta carry the output's scale
                tensors += [("weight", "bn_weight", scale), ("bias", "bn_bias", scale)]
            for name, role, space in tensors:
                eps = float(m.eps) if role == "bn_var" else 0.0
                axis = Axis(f"{where}.{name}", 0, role, eps=eps, offset=at)
                self.claim(axis, seg.perm, space, seg.width, where)
            out.append(_Seg(seg.perm, scale, seg.width))
            offset += seg.width
        if m.affine:
            self.mass[f"{where}.weight"] = None
        self.env[node] = _Layout(1, tuple(out))

    def layernorm(self, node: fx.Node, m: nn.LayerNorm) -> None:
        where, x = str(node.target), node.args[0]
        shape, lay = self.shape(x), self.layout(x)
        dim = len(shape) - 1
        if tuple(m.normalized_shape) != (shape[-1],) or (lay is not None and lay.dim != dim):
            self.unknown(node, "LayerNorm over more than the channel axis: not followed")
            return
        segs = self.segs_or_fixed(x, dim, where)
        if not all(s.inner == 1 for s in segs):
            self.unknown(node, "LayerNorm over a flattened feature map: not followed")
            return
        single, offset, out = len(segs) == 1, 0, []
        reason = "LayerNorm fixes the scale of each sample: its input units cannot be scaled"
        self.freeze(_Layout(dim, tuple(_Seg(None, s.scale, s.width) for s in segs)), where, reason)
        for seg in segs:
            at = None if single else offset
            scale = self.spaces.new_scale(where) if m.weight is not None else None
            for name, role in (("weight", "bn_weight"), ("bias", "bn_bias")):
                if getattr(m, name, None) is not None:
                    axis = Axis(f"{where}.{name}", 0, role, offset=at)
                    self.claim(axis, seg.perm, scale, seg.width, where)
            out.append(_Seg(seg.perm, scale, seg.width))
            offset += seg.width
        if m.weight is not None:
            self.mass[f"{where}.weight"] = None
        self.env[node] = _Layout(dim, tuple(out))

    def filter_response_norm(self, node: fx.Node, m: nn.Module) -> None:
        """y = max(gamma x / sqrt(mean(x^2) + eps) + beta, tau), per channel: tau, beta and
        gamma (shape (1, C, 1, 1)) move with the channels. The input's scale is fixed (the
        normalisation undoes it only up to eps); gamma, beta and tau carry the output's
        (the thresholded unit is positively homogeneous in the three together)."""
        where, x = str(node.target), node.args[0]
        if len(self.shape(x)) != m.gamma.dim():
            self.unknown(node, "filter response normalisation of an unexpected shape")
            return
        segs = self.segs_or_fixed(x, 1, where)
        reason = "filter response normalisation fixes each channel's scale (exact up to eps)"
        self.freeze(_Layout(1, tuple(_Seg(None, s.scale, s.width) for s in segs)), where, reason)
        single, offset, out = len(segs) == 1, 0, []
        for seg in segs:
            at = None if single else offset
            scale = None if seg.perm is None else self.spaces.new_scale(where)
            for name, role in (("gamma", "bn_weight"), ("beta", "bn_bias"), ("tau", "bn_bias")):
                self.claim(
                    Axis(f"{where}.{name}", 1, role, offset=at), seg.perm, scale, seg.width, where
                )
            out.append(_Seg(seg.perm, scale, seg.width))
            offset += seg.width
        self.mass[f"{where}.gamma"] = None
        self.env[node] = _Layout(1, tuple(out))

    # --------------------------------------------------------------- elementwise and shape ops

    def pool(self, node: fx.Node, spatial: int) -> None:
        x = node.args[0]
        lay = self.layout(x)
        if lay is None:
            self.env[node] = None
        elif lay.dim == 1 and lay.plain_channels and len(self.shape(x)) == spatial + 2:
            self.env[node] = lay
        else:
            self.unknown(node, "pools across units: not followed")

    def nonhomogeneous(self, node: fx.Node, name: str, x: fx.Node | None = None) -> None:
        lay = self.layout(node.args[0] if x is None else x)
        if lay is None:
            self.env[node] = None
            return
        if any([self.kill(s.scale) for s in lay.segs]):
            self.limit(
                self.where(node),
                f"{name} is not positively homogeneous: no scaling symmetry through it",
            )
        self.env[node] = _Layout(
            lay.dim, tuple(_Seg(s.perm, None, s.width, s.inner) for s in lay.segs)
        )

    def clamp(self, node: fx.Node, name: str) -> None:
        lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
        hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
        if lo == 0 and hi is None:  # clamp(min=0) is a ReLU
            self.env[node] = self.layout(node.args[0])
        else:
            self.nonhomogeneous(node, name)

    def add(self, node: fx.Node) -> None:
        where = self.where(node)
        a = node.args[0]
        b = node.args[1] if len(node.args) > 1 else node.kwargs.get("other")
        if not (self.is_tensor(a) and self.is_tensor(b)):
            x, c = (a, b) if self.is_tensor(a) else (b, a)
            if isinstance(c, (int, float)) and c == 0:
                self.env[node] = self.layout(x)
            else:  # a constant offset: units still permute, scales do not pass
                self.nonhomogeneous(node, "adding a constant", x)
            return
        la, lb = self.layout(a), self.layout(b)
        if self.shape(a) != self.shape(b) or self.shape(node) != self.shape(a):
            self.unknown(node, "broadcasting sum: not followed")
            return
        if la is None and lb is None:
            self.env[node] = None
            return
        if la is None or lb is None:
            self.freeze(la if lb is None else lb, where, _FIXED)
            self.env[node] = None
            return
        if la.dim != lb.dim or [(s.width, s.inner) for s in la.segs] != [
            (s.width, s.inner) for s in lb.segs
        ]:
            self.unknown(node, "sums values whose channel layouts differ: not followed")
            return
        segs = tuple(
            _Seg(
                self.unite_perm(sa.perm, sb.perm, where),
                self.unite_scale(sa.scale, sb.scale, where),
                sa.width,
                sa.inner,
            )
            for sa, sb in zip(la.segs, lb.segs)
        )
        self.env[node] = _Layout(la.dim, segs)

    def multiply(self, node: fx.Node, divide: bool) -> None:
        a = node.args[0]
        b = node.args[1] if len(node.args) > 1 else node.kwargs.get("other")
        if self.is_tensor(a) and isinstance(b, (int, float)):
            self.env[node] = self.layout(a)  # linear in the tensor
        elif not divide and self.is_tensor(b) and isinstance(a, (int, float)):
            self.env[node] = self.layout(b)
        else:
            self.unknown(node, "product of two tensors: not followed")

    def cat(self, node: fx.Node) -> None:
        tensors = node.args[0]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        dim %= len(self.shape(node))
        lays = [self.layout(t) for t in tensors]
        if all(lay is None for lay in lays):
            self.env[node] = None
            return
        if any(lay is not None and lay.dim != dim for lay in lays):
            self.unknown(node, "concatenates along an axis other than the channels: not followed")
            return
        where = self.where(node)
        segs = tuple(s for t in tensors for s in self.segs_or_fixed(t, dim, where))
        self.env[node] = _Layout(dim, segs)

    def reshape(self, node: fx.Node) -> None:
        x = node.args[0]
        lay = self.layout(x)
        if lay is None:
            self.env[node] = None
            return
        old, new = self.shape(x), self.shape(node)
        d = lay.dim
        pre, channels, post = math.prod(old[:d]), old[d], math.prod(old[d + 1 :])
        for nd in range(len(new)):
            if math.prod(new[:nd]) != pre:
                continue
            rest = math.prod(new[nd + 1 :])
            if new[nd] == channels and rest == post:
                self.env[node] = _Layout(nd, lay.segs)
                return
            if new[nd] == channels * post and rest == 1:
                segs = tuple(_Seg(s.perm, s.scale, s.width, s.inner * post) for s in lay.segs)
                self.env[node] = _Layout(nd, segs)
                return
        self.unknown(node, f"reshape {old} -> {new} mixes units: not followed")

    def transpose(self, node: fx.Node) -> None:
        x = node.args[0]
        lay = self.layout(x)
        if lay is None:
            self.env[node] = None
            return
        n, d = len(self.shape(x)), lay.dim
        t = node.target
        if t in ("t", torch.t):
            dims = [1, 0] if n == 2 else list(range(n))
        elif t in ("transpose", torch.transpose):
            a, b = (node.args[1], node.args[2]) if len(node.args) > 2 else (0, 1)
            dims = list(range(n))
            dims[a % n], dims[b % n] = dims[b % n], dims[a % n]
        else:
            rest = node.args[1:] if len(node.args) > 1 else node.kwargs.get("dims", ())
            dims = list(rest[0]) if len(rest) == 1 and isinstance(rest[0], Sequence) else rest
            dims = [int(i) % n for i in dims]
        self.env[node] = _Layout(dims.index(d), lay.segs)

    def reduce(self, node: fx.Node) -> None:
        x = node.args[0]
        lay = self.layout(x)
        if lay is None:
            self.env[node] = None
            return
        n = len(self.shape(x))
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        if dims is None:
            self.unknown(node, "reduces over the units: not followed")
            return
        dims = {int(i) % n for i in (dims if isinstance(dims, Sequence) else [dims])}
        if lay.dim in dims:
            self.unknown(node, "reduces over the units: not followed")
            return
        d = lay.dim if keep else lay.dim - sum(i < lay.dim for i in dims)
        self.env[node] = _Layout(d, lay.segs)

    # --------------------------------------------------------------- the output

    def output(self, node: fx.Node) -> None:
        leaves: list[fx.Node] = []
        fx.node.map_arg(node.args[0], lambda n: leaves.append(n))
        for leaf in leaves:
            self.freeze(self.layout(leaf), "output", None)
        if len(leaves) == 1 and self.is_tensor(leaves[0]) and node.args[0] is leaves[0]:
            self.output_bias, self.output_weight = self._softmax_layer(leaves[0])

    def _softmax_layer(self, node: fx.Node) -> tuple[str | None, str | None]:
        """(bias, weight) of the layer producing the output, where the softmax over its
        outputs is invariant to a common shift of the logits: b + c 1 through
        shift-transparent steps only; W + 1 v^T also needs a linear layer with one feature
        axis and no pooling after it (see the module docstring)."""
        pooled = False
        while True:
            if len(node.users) != 1:
                return None, None
            if node in self.producers:
                where, m = self.producers[node]
                out = m.out_features if isinstance(m, nn.Linear) else m.out_channels
                if out < 2:
                    return None, None
                flat = isinstance(m, _LINEAR) and len(self.shape(node)) == 2 and not pooled
                return (
                    f"{where}.bias" if m.bias is not None else None,
                    f"{where}.weight" if flat else None,
                )
            if not self._shift_transparent(node) or not self.is_tensor(node.args[0]):
                return None, None
            pooled = pooled or self._pools(node)
            node = node.args[0]

    def _pools(self, node: fx.Node) -> bool:
        if node.op == "call_module":
            kind = type(self.gm.get_submodule(node.target))
            return kind in _POOL_MODULES
        return node.op == "call_function" and node.target in _POOL_FUNCTIONS

    def _shift_transparent(self, node: fx.Node) -> bool:
        """Steps that turn a uniform shift of their input into a uniform shift of their output
        (softmax: into none)."""
        t = node.target
        if node.op == "call_module":
            m = self.gm.get_submodule(t)
            kind = type(m)
            if kind in (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d):  # zeros counted in a mean
                return not (m.count_include_pad and any(_as_tuple(m.padding)))
            return kind in (
                *_DROPOUT,
                nn.Identity,
                nn.Softmax,
                nn.LogSoftmax,
                *_RESHAPE_MODULES,
            ) or (kind in _POOL_MODULES)
        if node.op == "call_method":
            return t in _RESHAPE_METHODS | {"softmax", "log_softmax", "contiguous", "clone"}
        return t in _RESHAPE_FUNCTIONS | _SHIFT_FREE_POOLS | {
            F.dropout,
            F.softmax,
            F.log_softmax,
            torch.softmax,
            torch.log_softmax,
        }

    # --------------------------------------------------------------- the structure

    def symmetry(self, architecture: dict[str, Any], shapes: dict[str, tuple[int, ...]]):
        sp = self.spaces
        members: dict[int, list[_Record]] = {}
        for r in self.records:
            if sp.perm_alive(r.perm):
                members.setdefault(sp.pfind(r.perm), []).append(r)
        groups: list[UnitGroup] = []
        group_of: dict[int, str] = {}
        names: set[str] = set()
        scale_names: set[str] = set()
        scale_owner: dict[int, int] = {}
        for root in sorted(members):
            rs = members[root]
            keys = [r for r in rs if r.axis.role == "in" and r.axis.axis == 0 and r.axis.is_plain]
            if not keys:
                continue
            key = min(keys, key=lambda r: r.depth).axis
            name = _unique(key.tensor.removesuffix(".weight"), names)
            scales: dict[int, list[Axis]] = {}
            for r in rs:
                if sp.scale_alive(r.scale):
                    s = sp.sfind(r.scale)
                    scales.setdefault(s, []).append(r.axis)
                    scale_owner.setdefault(s, root)
            scale_groups = tuple(
                ScaleGroup(
                    _unique(sp.s_name[s], scale_names),
                    tuple(axes),
                    absorbed_by_bn=not any(a.role == "out" for a in axes),
                )
                for s, axes in scales.items()
                if scale_owner[s] == root and any(a.role in INCOMING_ROLES for a in axes)
            )
            groups.append(
                UnitGroup(
                    name,
                    sp.p_width[root],
                    tuple(r.axis for r in rs),
                    scale_groups,
                    key,
                    blocks=sp.p_blocks[root],
                )
            )
            group_of[root] = name
        couplings = _components([(sp.pfind(a), sp.pfind(b)) for a, b in self.couplings], group_of)
        return Symmetry(
            architecture,
            tuple(groups),
            shapes,
            couplings=couplings,
            output_bias=self.output_bias,
            mass_tensors=tuple(m for m in self.mass if m in shapes),
            limits=tuple(self.limits),
            output_weight=self.output_weight,
        )


def _homogeneous_function(t: Any) -> bool:
    if t in _HOMOGENEOUS_FUNCTIONS:
        return True
    # torchvision.ops.stochastic_depth (not imported: torchvision is heavy) scales whole
    # samples, by 0 or 1 / (1 - p), and is the identity in eval mode
    return getattr(t, "__name__", "") == "stochastic_depth" and getattr(
        t, "__module__", ""
    ).startswith("torchvision.ops")


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _unique(name: str, taken: set[str]) -> str:
    candidate, k = name, 1
    while candidate in taken:
        k += 1
        candidate = f"{name}#{k}"
    taken.add(candidate)
    return candidate


def _components(
    pairs: list[tuple[int, int]], group_of: dict[int, str]
) -> tuple[tuple[str, ...], ...]:
    """Coupled groups: connected components of the pairs whose both sides still move."""
    parent: dict[int, int] = {}

    def find(i: int) -> int:
        while parent.setdefault(i, i) != i:
            i = parent[i]
        return i

    for a, b in pairs:
        if a != b and a in group_of and b in group_of:
            ra, rb = find(a), find(b)
            parent[max(ra, rb)] = min(ra, rb)
    comps: dict[int, list[int]] = {}
    for i in sorted(parent):
        comps.setdefault(find(i), []).append(i)
    return tuple(tuple(group_of[i] for i in c) for c in comps.values() if len(c) > 1)


# ------------------------------------------------------------------------- public entry points


def default_input(model: nn.Module) -> torch.Tensor:
    """A batch of 2 inputs the model probably accepts: the shipped models' own input sizes,
    else 32 x 32 (x 32) maps with the first conv's channels, or the first linear's features."""
    from symbnn.models import MLP, OptuNet

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
        if isinstance(m, _CONV):
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
        from symbnn.models import example_input as spec_input

        example_input = spec_input(architecture, model)
    gm = trace(model, example_input)
    state = model.state_dict(keep_vars=True)
    names_of: dict[int, list[str]] = {}
    for name, t in state.items():
        names_of.setdefault(id(t), []).append(name)
    aliased = {n for names in names_of.values() if len(names) > 1 for n in names}
    derivation = _Derivation(gm, set(state), aliased)
    derivation.run()
    shapes = {name: tuple(t.shape) for name, t in state.items()}
    return derivation.symmetry(architecture or {"name": type(model).__name__}, shapes)


# ------------------------------------------------------------------------- comparing structures


def _signature(sym: Symmetry):
    groups = {}
    for g in sym.groups:
        scales = frozenset((frozenset(s.axes), s.absorbed_by_bn) for s in g.scales)
        groups[g.key] = (g.width, g.blocks, frozenset(g.axes), scales)
    couplings = frozenset(frozenset(sym.group(n).key for n in c) for c in sym.couplings)
    return groups, couplings


def structure_differences(a: Symmetry, b: Symmetry) -> list[str]:
    """How two structures differ, ignoring group and scale names, orders and ``limits``:
    an empty list when they describe the same symmetry (groups are matched by their key)."""
    out = []
    (ga, ca), (gb, cb) = _signature(a), _signature(b)
    for key in ga.keys() | gb.keys():
        if key not in ga or key not in gb:
            out.append(f"group keyed by {key.tensor} only in {'first' if key in ga else 'second'}")
            continue
        (wa, ba, axa, sa), (wb, bb, axb, sb) = ga[key], gb[key]
        if (wa, ba) != (wb, bb):
            out.append(f"{key.tensor}: width/blocks {wa}/{ba} vs {wb}/{bb}")
        if axa != axb:
            out.append(
                f"{key.tensor}: axes only in first {sorted(map(str, axa - axb))}, "
                f"only in second {sorted(map(str, axb - axa))}"
            )
        if sa != sb:
            out.append(f"{key.tensor}: scale groups differ")
    if ca != cb:
        out.append("couplings differ")
    if a.output_bias != b.output_bias:
        out.append(f"output bias {a.output_bias} vs {b.output_bias}")
    if a.output_weight != b.output_weight:
        out.append(f"output weight {a.output_weight} vs {b.output_weight}")
    if set(a.mass_tensors) != set(b.mass_tensors):
        out.append(f"mass tensors differ: {set(a.mass_tensors) ^ set(b.mass_tensors)}")
    if a.shapes != b.shapes:
        out.append("state-dict shapes differ")
    return out
