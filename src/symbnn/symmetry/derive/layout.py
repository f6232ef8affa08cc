"""Where a traced value's units sit: its channel axis and the segments along it, each from
one unit space and scale space (`symbnn.symmetry.derive`); and a tensor axis tied to them."""

from __future__ import annotations

from dataclasses import dataclass

from symbnn.symmetry.groups import Axis


@dataclass(frozen=True)
class Seg:
    """A run of channels along a value's channel axis, all from one unit space."""

    perm: int | None  # unit space; None: fixed units (network input, unknown origin)
    scale: int | None  # scale space; None: these units carry no free scale here
    width: int  # units
    inner: int = 1  # consecutive entries per unit (after a flatten)


@dataclass(frozen=True)
class Layout:
    dim: int  # the channel axis of the (batched) value
    segs: tuple[Seg, ...]

    @property
    def plain_channels(self) -> bool:
        return all(s.inner == 1 for s in self.segs)


@dataclass
class Record:
    """A tensor axis claimed for a unit space and scale space (``units`` wide)."""

    axis: Axis
    perm: int | None
    scale: int | None
    depth: int
    units: int
