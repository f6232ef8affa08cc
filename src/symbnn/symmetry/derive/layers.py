"""How the units go through the layers whose tensors move: conv, linear, BatchNorm, LayerNorm
and filter response normalisation (`symbnn.symmetry.derive`)."""

from __future__ import annotations

from torch import fx, nn

from symbnn.symmetry.derive.graph import shape
from symbnn.symmetry.derive.layout import Layout, Seg
from symbnn.symmetry.derive.values import Values
from symbnn.symmetry.groups import Axis


class Layers:
    """Each layer claims its own tensors' axes for the spaces it reads and creates."""

    def __init__(self, values: Values) -> None:
        self.values, self.ties = values, values.ties

    def _input_columns(self, node, weight: str, segs, where: str) -> None:
        single = len(segs) == 1
        offset = 0
        for seg in segs:
            axis = Axis(weight, 1, "out", offset=None if single else offset, inner=seg.inner)
            self.ties.claim(axis, seg.perm, seg.scale, seg.width, where)
            offset += seg.width * seg.inner

    def _rows(self, node, m: nn.Module, out: int, blocks: int, dim: int) -> None:
        where = str(node.target)
        self.values.depth[node] += 1
        perm, scale = self.ties.spaces.new_perm(out, blocks), self.ties.spaces.new_scale(where)
        self.ties.claim(
            Axis(f"{where}.weight", 0, "in"), perm, scale, out, where, self.values.depth[node]
        )
        if getattr(m, "bias", None) is not None:
            self.ties.claim(Axis(f"{where}.bias", 0, "bias"), perm, scale, out, where)
        self.values.mass[f"{where}.weight"] = None
        self.values.producers[node] = (where, m)
        self.values.env[node] = Layout(dim, (Seg(perm, scale, out),))

    def conv(self, node: fx.Node, m: nn.Conv1d | nn.Conv2d | nn.Conv3d) -> None:
        where, x = str(node.target), node.args[0]
        weight = f"{where}.weight"
        segs = self.values.segs_or_fixed(x, 1, where)
        if any(s.inner != 1 for s in segs):
            self.ties.freeze(Layout(1, segs), where, "convolves a flattened feature map")
            segs = (Seg(None, None, m.in_channels),)
        g = m.groups
        if g == 1:
            self._input_columns(node, weight, segs, where)
            self._rows(node, m, m.out_channels, 1, 1)
            return
        if len(segs) > 1:
            self.ties.freeze(Layout(1, segs), where, "grouped convolution over a concatenation")
            segs = (Seg(None, None, m.in_channels),)
        (seg,) = segs
        if seg.perm is not None:
            self.ties.constrain_blocks(seg.perm, g, where)
        self.ties.claim(Axis(weight, 1, "out", blocks=g), seg.perm, seg.scale, seg.width, where)
        self._rows(node, m, m.out_channels, g, 1)
        if seg.perm is not None:
            self.ties.couplings.append((seg.perm, self.values.layout(node).segs[0].perm))

    def linear(self, node: fx.Node, m: nn.Linear) -> None:
        where, x = str(node.target), node.args[0]
        dim = len(shape(x)) - 1
        self._input_columns(
            node, f"{where}.weight", self.values.segs_or_fixed(x, dim, where), where
        )
        self._rows(node, m, m.out_features, 1, dim)

    def batchnorm(self, node: fx.Node, m: nn.modules.batchnorm._BatchNorm) -> None:
        where, x = str(node.target), node.args[0]
        segs = self.values.segs_or_fixed(x, 1, where)
        if not all(s.inner == 1 for s in segs):
            self.ties.freeze(Layout(1, segs), where, "normalises a flattened feature map")
            segs = (Seg(None, None, m.num_features),)
        single, offset, out = len(segs) == 1, 0, []
        stats = m.track_running_stats and m.running_mean is not None
        for seg in segs:
            at = None if single else offset
            scale = None
            if m.affine and seg.perm is not None:
                scale = self.ties.spaces.new_scale(
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
                self.ties.claim(axis, seg.perm, space, seg.width, where)
            out.append(Seg(seg.perm, scale, seg.width))
            offset += seg.width
        if m.affine:
            self.values.mass[f"{where}.weight"] = None
        self.values.env[node] = Layout(1, tuple(out))

    def layernorm(self, node: fx.Node, m: nn.LayerNorm) -> None:
        where, x = str(node.target), node.args[0]
        x_shape, lay = shape(x), self.values.layout(x)
        dim = len(x_shape) - 1
        if tuple(m.normalized_shape) != (x_shape[-1],) or (lay is not None and lay.dim != dim):
            self.values.unknown(node, "LayerNorm over more than the channel axis: not followed")
            return
        segs = self.values.segs_or_fixed(x, dim, where)
        if not all(s.inner == 1 for s in segs):
            self.values.unknown(node, "LayerNorm over a flattened feature map: not followed")
            return
        single, offset, out = len(segs) == 1, 0, []
        reason = "LayerNorm fixes the scale of each sample: its input units cannot be scaled"
        self.ties.freeze(
            Layout(dim, tuple(Seg(None, s.scale, s.width) for s in segs)), where, reason
        )
        for seg in segs:
            at = None if single else offset
            scale = self.ties.spaces.new_scale(where) if m.weight is not None else None
            for name, role in (("weight", "bn_weight"), ("bias", "bn_bias")):
                if getattr(m, name, None) is not None:
                    axis = Axis(f"{where}.{name}", 0, role, offset=at)
                    self.ties.claim(axis, seg.perm, scale, seg.width, where)
            out.append(Seg(seg.perm, scale, seg.width))
            offset += seg.width
        if m.weight is not None:
            self.values.mass[f"{where}.weight"] = None
        self.values.env[node] = Layout(dim, tuple(out))

    def filter_response_norm(self, node: fx.Node, m: nn.Module) -> None:
        """y = max(gamma x / sqrt(mean(x^2) + eps) + beta, tau), per channel: tau, beta and
        gamma (shape (1, C, 1, 1)) move with the channels. The input's scale is fixed (the
        normalisation undoes it only up to eps); gamma, beta and tau carry the output's
        (the thresholded unit is positively homogeneous in the three together)."""
        where, x = str(node.target), node.args[0]
        if len(shape(x)) != m.gamma.dim():
            self.values.unknown(node, "filter response normalisation of an unexpected shape")
            return
        segs = self.values.segs_or_fixed(x, 1, where)
        reason = "filter response normalisation fixes each channel's scale (exact up to eps)"
        self.ties.freeze(Layout(1, tuple(Seg(None, s.scale, s.width) for s in segs)), where, reason)
        single, offset, out = len(segs) == 1, 0, []
        for seg in segs:
            at = None if single else offset
            scale = None if seg.perm is None else self.ties.spaces.new_scale(where)
            for name, role in (("gamma", "bn_weight"), ("beta", "bn_bias"), ("tau", "bn_bias")):
                self.ties.claim(
                    Axis(f"{where}.{name}", 1, role, offset=at), seg.perm, scale, seg.width, where
                )
            out.append(Seg(seg.perm, scale, seg.width))
            offset += seg.width
        self.values.mass[f"{where}.gamma"] = None
        self.values.env[node] = Layout(1, tuple(out))
