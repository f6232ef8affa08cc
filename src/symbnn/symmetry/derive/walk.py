"""The walk over a traced graph: each node's operation applied to the layouts of its inputs
(`symbnn.symmetry.derive`)."""

from __future__ import annotations

import operator

import torch
from torch import fx, nn

from symbnn.symmetry.derive import tables
from symbnn.symmetry.derive.graph import is_filter_response_norm, is_tensor, tensor_inputs
from symbnn.symmetry.derive.layers import Layers
from symbnn.symmetry.derive.operations import Operations
from symbnn.symmetry.derive.softmax import softmax_layer
from symbnn.symmetry.derive.ties import Ties
from symbnn.symmetry.derive.values import Values


class Walk:
    """One derivation: walks the graph once (`run`), tying units (`Ties`) as it goes."""

    def __init__(self, gm: fx.GraphModule, state_names: set[str], aliased: set[str]) -> None:
        self.gm = gm
        self.state_names = state_names  # the model's state-dict entries
        self.aliased = aliased  # entries that are one tensor under several names
        self.ties = Ties()
        self.values = Values(self.ties)
        self.layers = Layers(self.values)
        self.operations = Operations(self.values)
        self.output_bias: str | None = None
        self.output_weight: str | None = None

    def run(self) -> None:
        for node in self.gm.graph.nodes:
            inputs = node.all_input_nodes
            self.values.depth[node] = max((self.values.depth.get(n, 0) for n in inputs), default=0)
            if node.op in ("placeholder", "get_attr"):
                self.values.env[node] = None
            elif node.op == "output":
                self.output(node)
            elif node.op == "call_module":
                self.module(node, self.gm.get_submodule(node.target))
            else:
                self.function(node)

    def module(self, node: fx.Node, m: nn.Module) -> None:
        kind = type(m)
        if kind in (
            *tables.CONV,
            *tables.LINEAR,
            *tables.BATCHNORM,
            nn.LayerNorm,
        ):  # layers whose tensors move
            skip = getattr(m, "_non_persistent_buffers_set", set())
            tensors = (*m.named_parameters(recurse=False), *m.named_buffers(recurse=False))
            own = [f"{node.target}.{n}" for n, t in tensors if t is not None and n not in skip]
            if any(name not in self.state_names for name in own):
                self.values.unknown(
                    node, "its parameters are not state-dict entries (reparametrised)"
                )
                return
            if any(name in self.aliased for name in own):
                self.values.unknown(
                    node, "its parameters are shared under several state-dict names"
                )
                return
        if kind in tables.CONV:
            self.layers.conv(node, m)
        elif kind in tables.LINEAR:
            self.layers.linear(node, m)
        elif kind in tables.BATCHNORM:
            self.layers.batchnorm(node, m)
        elif kind is nn.LayerNorm:
            self.layers.layernorm(node, m)
        elif is_filter_response_norm(m):
            self.layers.filter_response_norm(node, m)
        elif kind in tables.HOMOGENEOUS_MODULES or (kind is nn.PReLU and m.num_parameters == 1):
            self.values.env[node] = self.values.layout(node.args[0])
        elif kind in tables.POOL_MODULES and not getattr(m, "return_indices", False):
            self.operations.pool(node, tables.POOL_MODULES[kind])
        elif kind in tables.NONHOMOGENEOUS_MODULES:
            self.operations.nonhomogeneous(node, kind.__name__)
        elif kind in tables.RESHAPE_MODULES:
            self.operations.reshape(node)
        else:
            self.values.unknown(
                node, f"unknown module type {kind.__name__}: treated as not symmetric"
            )

    def function(self, node: fx.Node) -> None:
        t, method = node.target, node.op == "call_method"
        name = t if method else getattr(t, "__name__", str(t))
        if not tensor_inputs(node):
            self.values.env[node] = None
            return
        if not is_tensor(node) and (
            (method and t in tables.METADATA_METHODS)
            or t is getattr
            or (t is operator.getitem and not is_tensor(node.args[0]))
        ):
            self.values.env[node] = None  # shapes, sizes, dtypes: no effect on the units
            return
        if (t in tables.SHAPED_LIKE_METHODS) if method else (t in tables.SHAPED_LIKE):
            self.values.env[node] = None  # a new tensor: fixed units, its input untouched
            return
        if not is_tensor(node):
            self.values.unknown(node, f"{name} returns something other than a tensor: not followed")
        elif (t in tables.HOMOGENEOUS_METHODS) if method else tables.homogeneous_function(t):
            self.values.env[node] = self.values.layout(node.args[0])
        elif not method and t in tables.POOL_FUNCTIONS:
            self.operations.pool(node, tables.POOL_FUNCTIONS[t])
        elif t in ("clamp", "clamp_", "clamp_min", "clamp_min_") if method else t is torch.clamp:
            self.operations.clamp(node, name)
        elif (
            (t in tables.NONHOMOGENEOUS_METHODS)
            if method
            else (t in tables.NONHOMOGENEOUS_FUNCTIONS)
        ):
            self.operations.nonhomogeneous(node, name)
        elif (t in tables.ADD_METHODS) if method else (t in tables.ADD):
            self.operations.add(node)
        elif (
            (t in tables.MUL_METHODS | tables.DIV_METHODS)
            if method
            else (t in tables.MUL | tables.DIV)
        ):
            self.operations.multiply(
                node, divide=(t in tables.DIV_METHODS) if method else (t in tables.DIV)
            )
        elif (t == "neg") if method else (t in tables.NEG):
            self.values.env[node] = self.values.layout(node.args[0])
        elif not method and t in tables.CAT:
            self.operations.cat(node)
        elif (t in tables.RESHAPE_METHODS) if method else (t in tables.RESHAPE_FUNCTIONS):
            self.operations.reshape(node)
        elif (t in tables.TRANSPOSE_METHODS) if method else (t in tables.TRANSPOSE):
            self.operations.transpose(node)
        elif (t in tables.REDUCE_METHODS) if method else (t in tables.REDUCE):
            self.operations.reduce(node)
        else:
            self.values.unknown(node, f"unknown operation {name}: treated as not symmetric")

    def output(self, node: fx.Node) -> None:
        leaves: list[fx.Node] = []
        fx.node.map_arg(node.args[0], lambda n: leaves.append(n))
        for leaf in leaves:
            self.ties.freeze(self.values.layout(leaf), "output", None)
        if len(leaves) == 1 and is_tensor(leaves[0]) and node.args[0] is leaves[0]:
            self.output_bias, self.output_weight = softmax_layer(
                self.gm, self.values.producers, leaves[0]
            )
