"""What the walk has learnt of each traced value: its layout (where its units sit), its depth,
and what the layers it met record (mass tensors, the producer of each value)."""

from __future__ import annotations

from torch import fx, nn

from symbnn.symmetry.derive.graph import location, shape, tensor_inputs
from symbnn.symmetry.derive.layout import Layout, Seg
from symbnn.symmetry.derive.ties import Ties


class Values:
    """The walk's knowledge of each node, and the `Ties` it adds to."""

    def __init__(self, ties: Ties) -> None:
        self.ties = ties
        self.env: dict[fx.Node, Layout | None] = {}
        self.depth: dict[fx.Node, int] = {}
        self.mass: dict[str, None] = {}  # tensors whose squares count in the mass
        self.producers: dict[fx.Node, tuple[str, nn.Module]] = {}  # conv/linear outputs

    def layout(self, node: fx.Node) -> Layout | None:
        return self.env.get(node)

    def segs_or_fixed(self, node: fx.Node, dim: int, where: str) -> tuple[Seg, ...]:
        """A value's segments along ``dim``; one fixed segment for an opaque value (and for a
        layout along another axis, whose spaces are fixed)."""
        lay = self.layout(node)
        if lay is not None and lay.dim == dim:
            return lay.segs
        self.ties.freeze(lay, where, "reads units along an axis other than their channel axis")
        return (Seg(None, None, shape(node)[dim]),)

    def unknown(self, node: fx.Node, reason: str) -> None:
        """Fix whatever reaches a step not followed; its output has no symmetry either, so it
        is reported even when its inputs were fixed already."""
        for n in tensor_inputs(node):
            self.ties.freeze(self.layout(n), location(node), None)
        self.ties.limit(location(node), reason)
        self.env[node] = None
