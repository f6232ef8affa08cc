"""Tying units: the unit spaces (permuted together) and scale spaces (scaled together) of a
derivation, united by residual sums and repeated use, fixed where units cannot move; the
tensor axes claimed by each; and the limits (what could not be proven symmetric)."""

from __future__ import annotations

from dataclasses import dataclass, field

from symbnn.symmetry.derive.layout import Layout, Record
from symbnn.symmetry.groups import Axis

FIXED = "tied to units that cannot move (the network input, or an operation not followed)"


@dataclass
class Spaces:
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


class Ties:
    """The spaces of one derivation and what they tie: tensor axes (``records``, one per
    claimed axis), couplings of grouped convolutions and the limits found."""

    def __init__(self) -> None:
        self.spaces = Spaces()
        self.records: list[Record] = []
        self.claims: dict[tuple[str, int, int | None], int] = {}
        self.spans: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
        self.couplings: list[tuple[int, int]] = []
        self.limits: dict[tuple[str, str], None] = {}

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

    def freeze(self, layout: Layout | None, where: str, reason: str | None) -> None:
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
                self.limit(where, FIXED)
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
        self.records.append(Record(axis, perm, scale, depth, units))

    def _conflict(self, where: str, perms, scales) -> None:
        changed = any([self.fix(p) for p in perms] + [self.kill(s) for s in scales])
        if changed:
            self.limit(where, "is used twice with different channel layouts")
