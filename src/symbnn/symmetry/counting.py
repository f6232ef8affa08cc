"""Counting symmetries per unit group, as in the paper's appendix D.4.

Permutations: a group of width w split into b blocks admits (w/b)!^b permutations within
blocks, and each coupling of grouped layers adds b! block permutations (counted once, on the
coupling's first group). Scaling degrees of freedom (sDoF): one per unit and scale group, so
a conv -> BatchNorm channel counts twice (D.4.3) and channels tied by residual sums count
their shared scale once (D.4.4). The softmax's additive freedom is not a unit group's: it
counts ``Symmetry.softmax_dof`` dimensions, n_{L-1} + 1 for a linear output layer with a bias
(W_L + 1 v^T and b + c 1; the paper counts only the bias constant, docs/deviations.md D34).

Disagreement with the paper (D.4.2): it keeps the grouped conv's own output permutations at
(out)! and drops the block permutation; a permutation moving an output channel to another
block changes the function, and swapping whole blocks on both sides does not. The tests
check both facts numerically. `paper_log10_permutations` counts by the paper's rule, for the
report's table beside ours (docs/maths.md, section 2.7).
"""

from __future__ import annotations

from typing import Any

from symbnn.symmetry.operators import log10_factorial
from symbnn.symmetry.structure import Symmetry


def count_symmetries(sym: Symmetry) -> list[dict[str, Any]]:
    """One row per unit group: name, width, blocks, log10 of its permutation count, sDoF."""
    leaders = {c[0]: sym.group(c[0]).blocks for c in sym.couplings}
    rows = []
    for g in sym.groups:
        log10_perms = g.blocks * log10_factorial(g.block_width)
        if g.name in leaders:
            log10_perms += log10_factorial(leaders[g.name])
        rows.append(
            {
                "group": g.name,
                "width": g.width,
                "blocks": g.blocks,
                "log10_permutations": log10_perms,
                "scaling_dof": g.width * len(g.scales),
                "bn_scaling_dof": g.width * sum(s.absorbed_by_bn for s in g.scales),
            }
        )
    return rows


def total_symmetries(sym: Symmetry) -> dict[str, float]:
    """log10 of the permutation count, the scaling and the softmax degrees of freedom."""
    rows = count_symmetries(sym)
    return {
        "log10_permutations": sum(r["log10_permutations"] for r in rows),
        "scaling_dof": sum(r["scaling_dof"] for r in rows),
        "softmax_dof": sym.softmax_dof,
    }


def feeds_grouped_conv(group) -> bool:
    """Whether the group's channels are read by a grouped convolution (a block-local `out` axis)."""
    return any(a.role == "out" and a.blocks > 1 for a in group.axes)


def paper_log10_permutations(sym: Symmetry) -> float:
    """log10 of the permutation count by the paper's D.4.2 rule: a layer whose channels feed a
    grouped convolution keeps only its within-group permutations, (w/g)!^g, while every other
    unit group, a grouped conv's own output channels included, keeps all w! (no shared block
    permutation). Equal to ``total_symmetries`` for networks without grouped convolutions."""
    return sum(
        g.blocks * log10_factorial(g.block_width)
        if feeds_grouped_conv(g)
        else log10_factorial(g.width)
        for g in sym.groups
    )
