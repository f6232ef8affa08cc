"""The derived structure: the unit groups that can still move, with their scale groups,
keys and couplings, as a `Symmetry` (`symbnn.symmetry.derive`)."""

from __future__ import annotations

from typing import Any

from symbnn.symmetry.derive.layout import Record
from symbnn.symmetry.derive.walk import Walk
from symbnn.symmetry.groups import INCOMING_ROLES, Axis, ScaleGroup, UnitGroup
from symbnn.symmetry.structure import Symmetry


def structure(
    walk: Walk, architecture: dict[str, Any], shapes: dict[str, tuple[int, ...]]
) -> Symmetry:
    """The structure ``walk`` found, over a state dict of ``shapes``: a unit group per unit
    space that can still move and has a plain incoming key; ``architecture`` is recorded."""
    ties = walk.ties
    sp = ties.spaces
    members: dict[int, list[Record]] = {}
    for r in ties.records:
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
    couplings = _components([(sp.pfind(a), sp.pfind(b)) for a, b in ties.couplings], group_of)
    return Symmetry(
        architecture,
        tuple(groups),
        shapes,
        couplings=couplings,
        output_bias=walk.output_bias,
        mass_tensors=tuple(m for m in walk.values.mass if m in shapes),
        limits=tuple(ties.limits),
        output_weight=walk.output_weight,
    )


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
