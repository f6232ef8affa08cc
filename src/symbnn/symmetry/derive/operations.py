"""How the units go through elementwise, pooling, sum, product and shape operations
(`symbnn.symmetry.derive`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import fx

from symbnn.symmetry.derive.graph import is_tensor, location, shape
from symbnn.symmetry.derive.layout import Layout, Seg
from symbnn.symmetry.derive.ties import FIXED
from symbnn.symmetry.derive.values import Values


class Operations:
    """Each operation maps its inputs' layouts to its output's, uniting, ending or fixing
    spaces on the way."""

    def __init__(self, values: Values) -> None:
        self.values, self.ties = values, values.ties

    def pool(self, node: fx.Node, spatial: int) -> None:
        x = node.args[0]
        lay = self.values.layout(x)
        if lay is None:
            self.values.env[node] = None
        elif lay.dim == 1 and lay.plain_channels and len(shape(x)) == spatial + 2:
            self.values.env[node] = lay
        else:
            self.values.unknown(node, "pools across units: not followed")

    def nonhomogeneous(self, node: fx.Node, name: str, x: fx.Node | None = None) -> None:
        lay = self.values.layout(node.args[0] if x is None else x)
        if lay is None:
            self.values.env[node] = None
            return
        if any([self.ties.kill(s.scale) for s in lay.segs]):
            self.ties.limit(
                location(node),
                f"{name} is not positively homogeneous: no scaling symmetry through it",
            )
        self.values.env[node] = Layout(
            lay.dim, tuple(Seg(s.perm, None, s.width, s.inner) for s in lay.segs)
        )

    def clamp(self, node: fx.Node, name: str) -> None:
        lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
        hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
        if lo == 0 and hi is None:  # clamp(min=0) is a ReLU
            self.values.env[node] = self.values.layout(node.args[0])
        else:
            self.nonhomogeneous(node, name)

    def add(self, node: fx.Node) -> None:
        where = location(node)
        a = node.args[0]
        b = node.args[1] if len(node.args) > 1 else node.kwargs.get("other")
        if not (is_tensor(a) and is_tensor(b)):
            x, c = (a, b) if is_tensor(a) else (b, a)
            if isinstance(c, (int, float)) and c == 0:
                self.values.env[node] = self.values.layout(x)
            else:  # a constant offset: units still permute, scales do not pass
                self.nonhomogeneous(node, "adding a constant", x)
            return
        la, lb = self.values.layout(a), self.values.layout(b)
        if shape(a) != shape(b) or shape(node) != shape(a):
            self.values.unknown(node, "broadcasting sum: not followed")
            return
        if la is None and lb is None:
            self.values.env[node] = None
            return
        if la is None or lb is None:
            self.ties.freeze(la if lb is None else lb, where, FIXED)
            self.values.env[node] = None
            return
        if la.dim != lb.dim or [(s.width, s.inner) for s in la.segs] != [
            (s.width, s.inner) for s in lb.segs
        ]:
            self.values.unknown(node, "sums values whose channel layouts differ: not followed")
            return
        segs = tuple(
            Seg(
                self.ties.unite_perm(sa.perm, sb.perm, where),
                self.ties.unite_scale(sa.scale, sb.scale, where),
                sa.width,
                sa.inner,
            )
            for sa, sb in zip(la.segs, lb.segs)
        )
        self.values.env[node] = Layout(la.dim, segs)

    def multiply(self, node: fx.Node, divide: bool) -> None:
        a = node.args[0]
        b = node.args[1] if len(node.args) > 1 else node.kwargs.get("other")
        if is_tensor(a) and isinstance(b, (int, float)):
            self.values.env[node] = self.values.layout(a)  # linear in the tensor
        elif not divide and is_tensor(b) and isinstance(a, (int, float)):
            self.values.env[node] = self.values.layout(b)
        else:
            self.values.unknown(node, "product of two tensors: not followed")

    def cat(self, node: fx.Node) -> None:
        tensors = node.args[0]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        dim %= len(shape(node))
        lays = [self.values.layout(t) for t in tensors]
        if all(lay is None for lay in lays):
            self.values.env[node] = None
            return
        if any(lay is not None and lay.dim != dim for lay in lays):
            self.values.unknown(
                node, "concatenates along an axis other than the channels: not followed"
            )
            return
        where = location(node)
        segs = tuple(s for t in tensors for s in self.values.segs_or_fixed(t, dim, where))
        self.values.env[node] = Layout(dim, segs)

    def reshape(self, node: fx.Node) -> None:
        x = node.args[0]
        lay = self.values.layout(x)
        if lay is None:
            self.values.env[node] = None
            return
        old, new = shape(x), shape(node)
        d = lay.dim
        pre, channels, post = math.prod(old[:d]), old[d], math.prod(old[d + 1 :])
        for nd in range(len(new)):
            if math.prod(new[:nd]) != pre:
                continue
            rest = math.prod(new[nd + 1 :])
            if new[nd] == channels and rest == post:
                self.values.env[node] = Layout(nd, lay.segs)
                return
            if new[nd] == channels * post and rest == 1:
                segs = tuple(Seg(s.perm, s.scale, s.width, s.inner * post) for s in lay.segs)
                self.values.env[node] = Layout(nd, segs)
                return
        self.values.unknown(node, f"reshape {old} -> {new} mixes units: not followed")

    def transpose(self, node: fx.Node) -> None:
        x = node.args[0]
        lay = self.values.layout(x)
        if lay is None:
            self.values.env[node] = None
            return
        n, d = len(shape(x)), lay.dim
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
        self.values.env[node] = Layout(dims.index(d), lay.segs)

    def reduce(self, node: fx.Node) -> None:
        x = node.args[0]
        lay = self.values.layout(x)
        if lay is None:
            self.values.env[node] = None
            return
        n = len(shape(x))
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        if dims is None:
            self.values.unknown(node, "reduces over the units: not followed")
            return
        dims = {int(i) % n for i in (dims if isinstance(dims, Sequence) else [dims])}
        if lay.dim in dims:
            self.values.unknown(node, "reduces over the units: not followed")
            return
        d = lay.dim if keep else lay.dim - sum(i < lay.dim for i in dims)
        self.values.env[node] = Layout(d, lay.segs)
