"""A network's symmetry structure as data: tied unit groups (docs/maths.md, section 1).

The symmetry operators, the canonical form, the counting and the min-mass solvers never look
at an architecture; they read one of these descriptions, so a single algorithm serves every
model (the "permutation spec" idea of Git Re-Basin, extended to scales).

Vocabulary:

* An ``Axis`` is one axis of one state-dict tensor indexed by a group's units, with a
  ``role`` that says how the tensor moves when a unit is scaled (ROLE_POWER).
* A ``ScaleGroup`` is one positive scale per unit and the axes it multiplies. A unit group
  may have several: in a conv -> BatchNorm -> ReLU chain the conv output channel (absorbed by
  the BatchNorm running statistics, ``absorbed_by_bn``) and the BatchNorm output (carried by
  gamma/beta, undone by the next layer) scale independently but permute together (D.4.3).
* A ``UnitGroup`` is a set of units that permute together: every axis in ``axes`` is
  gathered with the group's permutation. Channels tied by residual sums form one group.
  ``blocks > 1`` means permutations must map blocks of ``width // blocks`` consecutive units
  onto blocks (grouped convolutions, D.4.2).
* A ``coupling`` lists unit groups whose blocks move together: the channels feeding a grouped
  conv and that conv's output channels. Swapping two blocks of one without the other changes
  the function; swapping both is a symmetry.
* An axis need not belong to one group whole. ``offset`` says the group owns only the slice
  ``[offset, offset + span)`` of the axis (a concatenation: DenseNet's BatchNorms and convs
  read many groups side by side) and ``inner`` that each unit owns ``inner`` consecutive
  entries (a C x H x W map flattened into a Linear: ``inner = H * W``). Such a structure is
  not *plain*: the operators handle it, while the canonical form, min-mass and weight matching
  read whole axes and run on its plain view (`Symmetry.plain`: the sliced tensors cut into one
  entry per slice, see `symbnn.symmetry.plain`); each of them takes that view itself.
* The softmax's additive freedom lives in the output layer: ``output_bias`` (a common constant
  added to every logit's bias) and ``output_weight`` (a common vector added to every row of
  the last weight, W_L + 1 v^T). Both are whole tensors whose rows are the fixed output units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from symbnn.symmetry.groups import INCOMING_ROLES, ROLE_POWER, Axis, ScaleGroup, UnitGroup
from symbnn.symmetry.plain import PlainView

__all__ = [
    "INCOMING_ROLES",
    "ROLE_POWER",
    "Axis",
    "ScaleGroup",
    "Symmetry",
    "UnitGroup",
    "topological_group_order",
    "topological_scale_order",
    "validate",
]


@dataclass(frozen=True)
class Symmetry:
    """The whole symmetry structure of one architecture."""

    architecture: dict[str, Any]
    groups: tuple[UnitGroup, ...]
    shapes: dict[str, tuple[int, ...]]
    couplings: tuple[tuple[str, ...], ...] = ()
    output_bias: str | None = None  # b <- b + c 1 keeps the softmax; None: no such bias
    mass_tensors: tuple[str, ...] = ()
    # (module, reason) for what a derived structure could not prove symmetric (`symbnn.symmetry.derive`)
    limits: tuple[tuple[str, str], ...] = ()
    # W <- W + 1 v^T (one vector added to every row) keeps the softmax; None: no such weight
    output_weight: str | None = None

    def __post_init__(self) -> None:
        validate(self)

    @cached_property
    def is_plain(self) -> bool:
        """Every axis is a whole tensor axis (no concatenation slices, no flattened maps)."""
        return all(a.is_plain for g in self.groups for a in g.axes)

    @cached_property
    def plain(self) -> PlainView[Symmetry]:
        """The plain view (`symbnn.symmetry.plain.PlainView`): this structure over a state whose
        sliced tensors are cut into one entry per slice, with ``split`` and ``join``."""
        return PlainView(self)

    def group(self, name: str) -> UnitGroup:
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(f"no unit group {name!r} (has: {', '.join(g.name for g in self.groups)})")

    @cached_property
    def scale_groups(self) -> tuple[ScaleGroup, ...]:
        return tuple(s for g in self.groups for s in g.scales)

    @cached_property
    def scale_index(self) -> dict[str, ScaleGroup]:
        return {s.name: s for s in self.scale_groups}

    def unit_group_of(self, scale_name: str) -> UnitGroup:
        for g in self.groups:
            if any(s.name == scale_name for s in g.scales):
                return g
        raise KeyError(f"no scale group {scale_name!r}")

    @cached_property
    def tensors(self) -> tuple[str, ...]:
        """State-dict entries that some symmetry moves (others, e.g. num_batches_tracked, never move)."""
        seen: dict[str, None] = {}
        for g in self.groups:
            for a in g.axes:
                seen[a.tensor] = None
        for name in (self.output_weight, self.output_bias):
            if name:
                seen[name] = None
        return tuple(seen)

    @cached_property
    def softmax_dof(self) -> int:
        """Dimensions of the softmax's additive freedom: one per column of the output weight
        (n_{L-1} for a linear layer) and one for the output bias."""
        dof = int(self.output_bias is not None)
        if self.output_weight is not None:
            dof += math.prod(self.shapes[self.output_weight][1:])
        return dof

    def coupling_of(self, group_name: str) -> tuple[str, ...] | None:
        for c in self.couplings:
            if group_name in c:
                return c
        return None


def validate(sym: Symmetry) -> None:
    """Raise ValueError when a description is inconsistent (sizes, roles, names)."""
    names = [g.name for g in sym.groups]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate unit-group names in {names}")
    scale_names = [s.name for s in sym.scale_groups]
    if len(set(scale_names)) != len(scale_names):
        raise ValueError(f"duplicate scale-group names in {scale_names}")
    claimed: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    for g in sym.groups:
        if g.width < 1 or g.blocks < 1 or g.width % g.blocks:
            raise ValueError(
                f"group {g.name}: width {g.width} not divisible into {g.blocks} blocks"
            )
        for a in g.axes:
            if a.tensor not in sym.shapes:
                raise ValueError(f"group {g.name}: unknown tensor {a.tensor}")
            if not 0 <= a.axis < len(sym.shapes[a.tensor]):
                raise ValueError(f"group {g.name}: {a.tensor} has no axis {a.axis}")
            size = sym.shapes[a.tensor][a.axis]
            expected = g.width // a.blocks * a.inner
            start = 0 if a.offset is None else a.offset
            if (size != expected) if a.offset is None else (start + expected > size):
                raise ValueError(
                    f"group {g.name}: {a.tensor} axis {a.axis} has size {size}, expected "
                    f"{expected if a.offset is None else f'at least {start + expected}'}"
                )
            if a.blocks > 1 and a.blocks != g.blocks:
                raise ValueError(
                    f"group {g.name}: {a.tensor} has {a.blocks} blocks, the group {g.blocks}"
                )
            spans = claimed.setdefault((a.tensor, a.axis), [])
            for lo, hi, other in spans:
                if start < hi and lo < start + expected:
                    raise ValueError(
                        f"{a.tensor} axis {a.axis} belongs to both {other} and {g.name}"
                    )
            spans.append((start, start + expected, g.name))
        for s in g.scales:
            if not set(s.axes) <= set(g.axes):
                raise ValueError(f"scale group {s.name}: axes outside unit group {g.name}")
            if not s.incoming:
                raise ValueError(
                    f"scale group {s.name}: no incoming weights, so no canonical scale"
                )
        if g.key not in g.axes or g.key.role != "in":
            raise ValueError(f"group {g.name}: key {g.key} must be one of its 'in' axes")
    for coupling in sym.couplings:
        blocks = {sym.group(n).blocks for n in coupling}
        if len(blocks) != 1 or blocks == {1}:
            raise ValueError(f"coupling {coupling}: groups must share one block count > 1")
    for name in sym.mass_tensors:
        if name not in sym.shapes:
            raise ValueError(f"mass tensor {name} is not in the state dict")
    _validate_output(sym)
    _ = topological_scale_order(sym), topological_group_order(sym)


def _validate_output(sym: Symmetry) -> None:
    """The softmax's tensors exist, have one row per output (at least two) and are fixed rows:
    no unit group owns their first axis."""
    outputs = {}
    for what, name, dims in (("bias", sym.output_bias, 1), ("weight", sym.output_weight, 2)):
        if name is None:
            continue
        shape = sym.shapes.get(name)
        if shape is None:
            raise ValueError(f"output {what} {name} is not in the state dict")
        if len(shape) < dims or shape[0] < 2:
            raise ValueError(f"output {what} {name} has shape {shape}: not a softmax layer")
        for g in sym.groups:
            for a in g.axes:
                if a.tensor == name and a.axis == 0:
                    raise ValueError(f"output {what} {name}: its rows belong to group {g.name}")
        outputs[what] = shape[0]
    if len(set(outputs.values())) > 1:
        raise ValueError(f"output weight and bias disagree on the number of outputs: {outputs}")


def _toposort(items: list[str], deps: dict[str, set[str]], what: str) -> list[str]:
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(n: str, path: tuple[str, ...]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            raise ValueError(f"cyclic {what} dependencies: {' -> '.join(path + (n,))}")
        state[n] = 1
        for d in sorted(deps[n], key=items.index):
            visit(d, path + (n,))
        state[n] = 2
        order.append(n)

    for n in items:
        visit(n, ())
    return order


def _column_owners(sym: Symmetry) -> dict[str, list[tuple[str, str]]]:
    """tensor -> [(unit group, scale group or '')] owning (slices of) its 'out' (column) axis."""
    owners: dict[str, list[tuple[str, str]]] = {}
    for g in sym.groups:
        for a in g.axes:
            if a.role == "out":
                scale = next((s.name for s in g.scales if a in s.axes), "")
                owners.setdefault(a.tensor, []).append((g.name, scale))
    return owners


def topological_scale_order(sym: Symmetry) -> list[ScaleGroup]:
    """Scale groups ordered so that each one's incoming rows are final (their columns already
    scaled) when its norm is taken: the input-side order of docs/maths.md, section 2."""
    owners = _column_owners(sym)
    groups = {s.name: s for s in sym.scale_groups}
    deps = {
        n: {scale for a in s.incoming for _, scale in owners.get(a.tensor, ()) if scale}
        for n, s in groups.items()
    }
    return [groups[n] for n in _toposort(list(groups), deps, "scale-group")]


def topological_group_order(sym: Symmetry) -> list[UnitGroup]:
    """Unit groups ordered so that each one's key rows have final columns when it is sorted;
    coupled groups follow the coupling's first (input-side) group."""
    owners = _column_owners(sym)
    names = [g.name for g in sym.groups]
    deps: dict[str, set[str]] = {n: set() for n in names}
    for g in sym.groups:
        deps[g.name].update(group for group, _ in owners.get(g.key.tensor, ()))
        coupling = sym.coupling_of(g.name)
        if coupling and coupling[0] != g.name:
            deps[g.name].add(coupling[0])
    return [sym.group(n) for n in _toposort(names, deps, "unit-group")]
