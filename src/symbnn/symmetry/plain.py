"""The plain view of a symmetry structure whose axes are not all whole tensor axes.

A derived structure (`symbnn.symmetry.derive`) may give a unit group only a slice of an axis
(``Axis.offset``: a concatenation, e.g. DenseNet's BatchNorms and convs over many groups'
channels) or several consecutive entries per unit (``Axis.inner``: a C x H x W map flattened
into a Linear). The canonical form, min-mass and weight matching read whole axes, so they run
on the plain view: every such tensor is cut along its sliced axis into one state entry per
slice (named ``"<tensor>[start:stop]"``; gaps no group owns get entries too), a flattened
slice is unflattened to (units, inner), and the structure is rewritten over those entries:

* an axis on the cut axis maps to its own piece, now whole and plain;
* an axis on another axis of a cut tensor (a conv's output rows, when its input columns are
  cut) maps to that axis of every piece, so every engine step sees whole rows again (a norm
  over the incoming rows concatenates the pieces; the sorting key reads the first piece);
* mass tensors and shapes list the pieces in place of the tensor;
* the output bias is never cut; the output weight keeps its name when it is not cut, and is
  left out (None) when its columns are: the softmax step of the canonical form reads whole
  output rows, so it runs in the model's own layout (`symbnn.symmetry.canonical`).

``split`` and ``join`` move a state (one network or a stack) between the two layouts; both
are exact (slicing and concatenation). Plain structures need none of this: their view is the
identity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

import torch

from symbnn.symmetry.groups import Axis, ScaleGroup, StructureFields, UnitGroup

# The structure a view is built from and rewrites (a `symbnn.symmetry.structure.Symmetry`,
# which builds its own view, so this module cannot import it).
Structure = TypeVar("Structure", bound=StructureFields)


@dataclass(frozen=True)
class Piece:
    name: str
    start: int
    stop: int
    inner: int  # > 1: unflattened to (units, inner) in the plain view

    def shape(self, shape: tuple[int, ...], cut: int) -> tuple[int, ...]:
        size = self.stop - self.start
        middle = (size // self.inner, self.inner) if self.inner > 1 else (size,)
        return (*shape[:cut], *middle, *shape[cut + 1 :])


class PlainView(Generic[Structure]):
    """``sym`` rewritten over a state cut into whole-axis pieces (see the module docstring)."""

    def __init__(self, source: Structure) -> None:
        self.source = source
        self.cuts: dict[str, tuple[int, list[Piece]]] = {}
        if source.is_plain:
            self.sym = source
            return
        by_tensor: dict[str, list[tuple[Axis, int]]] = {}
        for g in source.groups:
            for a in g.axes:
                by_tensor.setdefault(a.tensor, []).append((a, g.width))
        for tensor, axes in by_tensor.items():
            sliced = {a.axis for a, _ in axes if not a.is_plain}
            if not sliced:
                continue
            if len(sliced) > 1:
                raise ValueError(
                    f"{tensor}: slices on several axes {sorted(sliced)} are not supported"
                )
            (cut,) = sliced
            self.cuts[tensor] = (cut, _pieces(tensor, cut, source, axes))
        if source.output_bias in self.cuts:
            raise ValueError(f"the output bias {source.output_bias} cannot be sliced")
        self.sym = self._rewrite()

    # ------------------------------------------------------------------ the plain structure

    def _map(self, a: Axis) -> tuple[Axis, ...]:
        if a.tensor not in self.cuts:
            return (a,)
        cut, pieces = self.cuts[a.tensor]
        plain = dict(offset=None, inner=1)
        if a.axis == cut:
            start = 0 if a.offset is None else a.offset
            (piece,) = [p for p in pieces if p.start == start]
            return (replace(a, tensor=piece.name, **plain),)
        return tuple(
            replace(
                a,
                tensor=p.name,
                axis=a.axis + (1 if a.axis > cut and p.inner > 1 else 0),
                **plain,
            )
            for p in pieces
        )

    def _rewrite(self) -> Structure:
        src = self.source
        groups = []
        for g in src.groups:
            axes = tuple(m for a in g.axes for m in self._map(a))
            scales = tuple(
                ScaleGroup(s.name, tuple(m for a in s.axes for m in self._map(a)), s.absorbed_by_bn)
                for s in g.scales
            )
            groups.append(UnitGroup(g.name, g.width, axes, scales, self._map(g.key)[0], g.blocks))
        shapes: dict[str, tuple[int, ...]] = {}
        for name, shape in src.shapes.items():
            if name in self.cuts:
                cut, pieces = self.cuts[name]
                shapes.update({p.name: p.shape(shape, cut) for p in pieces})
            else:
                shapes[name] = shape
        mass = []
        for name in src.mass_tensors:
            mass += [p.name for p in self.cuts[name][1]] if name in self.cuts else [name]
        return replace(
            src,
            groups=tuple(groups),
            shapes=shapes,
            mass_tensors=tuple(mass),
            output_weight=None if src.output_weight in self.cuts else src.output_weight,
        )

    # ------------------------------------------------------------------ moving states

    def _lead(self, name: str, t: torch.Tensor, shape: tuple[int, ...]) -> int:
        lead = t.dim() - len(shape)
        if lead not in (0, 1):
            raise ValueError(f"{name}: shape {tuple(t.shape)} is neither {shape} nor (n, *{shape})")
        return lead

    def split(self, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The state in the plain view's layout (views where slicing allows)."""
        if not self.cuts:
            return dict(state)
        missing = [name for name in self.cuts if name not in state]
        if missing:
            raise ValueError(
                f"state has no entry {missing[0]!r} required by the symmetry structure"
            )
        out: dict[str, torch.Tensor] = {}
        for name, t in state.items():
            if name not in self.cuts:
                out[name] = t
                continue
            cut, pieces = self.cuts[name]
            dim = cut + self._lead(name, t, self.source.shapes[name])
            for p in pieces:
                x = t.narrow(dim, p.start, p.stop - p.start)
                out[p.name] = x.unflatten(dim, (-1, p.inner)) if p.inner > 1 else x
        return out

    def join(self, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Back from the plain view's layout to the model's state-dict layout."""
        if not self.cuts:
            return dict(state)
        owner = {p.name: name for name, (_, pieces) in self.cuts.items() for p in pieces}
        out: dict[str, torch.Tensor] = {}
        for name, t in state.items():
            if name not in owner:
                out[name] = t
                continue
            whole = owner[name]
            if whole in out:
                continue
            cut, pieces = self.cuts[whole]
            missing = [p.name for p in pieces if p.name not in state]
            if missing:
                raise ValueError(f"cannot join {whole}: the state has no piece {missing[0]!r}")
            first = state[pieces[0].name]
            dim = cut + self._lead(pieces[0].name, first, self.sym.shapes[pieces[0].name])
            parts = [
                state[p.name].flatten(dim, dim + 1) if p.inner > 1 else state[p.name]
                for p in pieces
            ]
            # One piece (a flattened map read whole) needs no copy.
            out[whole] = parts[0] if len(parts) == 1 else torch.cat(parts, dim=dim)
        return out


def _pieces(
    tensor: str, cut: int, sym: StructureFields, axes: list[tuple[Axis, int]]
) -> list[Piece]:
    """The slices of ``tensor``'s axis ``cut`` that groups own, and the gaps between them."""
    size = sym.shapes[tensor][cut]
    owned = []
    for a, width in axes:
        if a.axis != cut:
            continue
        start = 0 if a.offset is None else a.offset
        owned.append((start, start + width // a.blocks * a.inner, a.inner))
    pieces, at = [], 0
    for start, stop, inner in sorted(owned):
        if start > at:
            pieces.append(Piece(f"{tensor}[{at}:{start}]", at, start, 1))
        pieces.append(Piece(f"{tensor}[{start}:{stop}]", start, stop, inner))
        at = stop
    if at < size:
        pieces.append(Piece(f"{tensor}[{at}:{size}]", at, size, 1))
    return pieces
