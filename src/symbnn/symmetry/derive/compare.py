"""Comparing two symmetry structures up to names and orders (`symbnn.symmetry.derive`)."""

from __future__ import annotations

from symbnn.symmetry.structure import Symmetry


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
