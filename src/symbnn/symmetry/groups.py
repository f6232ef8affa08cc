"""The parts of a symmetry structure (`symbnn.symmetry.structure`, whose docstring has the
vocabulary): an ``Axis`` of a tensor indexed by units, a ``ScaleGroup`` of axes scaled
together, a ``UnitGroup`` of units permuted together; and ``StructureFields``, the fields of a
whole structure that its plain view (`symbnn.symmetry.plain`) reads and rewrites."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# Exponent of the unit's scale applied to each role (bn_var is special: s^2 (var + eps) - eps,
# exact in eval mode because BatchNorm divides by sqrt(var + eps)).
ROLE_POWER = {
    "in": 1,  # rows of a conv/linear weight: the unit's incoming weights
    "bias": 1,  # the unit's bias
    "out": -1,  # columns of the next conv/linear weight: the unit's outgoing weights
    "bn_weight": 1,  # BatchNorm gamma (the incoming weight of a BatchNorm output unit)
    "bn_bias": 1,  # BatchNorm beta
    "bn_mean": 1,  # BatchNorm running_mean
    "bn_var": 2,  # BatchNorm running_var (eps-exact, see above)
}
INCOMING_ROLES = ("in", "bn_weight")


@dataclass(frozen=True)
class Axis:
    tensor: str
    axis: int  # axis of the unbatched tensor
    role: str
    blocks: int = 1  # > 1: an "out" axis of a grouped conv, indexed within the row's block
    eps: float = 0.0  # BatchNorm eps, for role "bn_var"
    offset: int | None = None  # None: the whole axis; else the group's slice starts here
    inner: int = 1  # consecutive entries per unit (a flattened C x H x W map: H * W)

    def __post_init__(self) -> None:
        if self.role not in ROLE_POWER:
            raise ValueError(
                f"unknown role {self.role!r} for {self.tensor} (known: {sorted(ROLE_POWER)})"
            )
        if self.blocks > 1 and (self.role != "out" or self.axis != 1):
            raise ValueError(f"{self.tensor}: only axis 1 with role 'out' can be block-local")
        if self.inner < 1 or (self.offset is not None and self.offset < 0):
            raise ValueError(f"{self.tensor}: bad slice (offset {self.offset}, inner {self.inner})")
        if self.blocks > 1 and not self.is_plain:
            raise ValueError(f"{self.tensor}: a block-local axis cannot also be sliced")

    @property
    def is_plain(self) -> bool:
        """The group owns the whole axis, one entry per unit."""
        return self.offset is None and self.inner == 1


@dataclass(frozen=True)
class ScaleGroup:
    name: str
    axes: tuple[Axis, ...]
    absorbed_by_bn: bool = False  # conv output channel feeding BatchNorm (no ReLU involved)

    @property
    def incoming(self) -> tuple[Axis, ...]:
        return tuple(a for a in self.axes if a.role in INCOMING_ROLES)


@dataclass(frozen=True)
class UnitGroup:
    name: str
    width: int
    axes: tuple[Axis, ...]
    scales: tuple[ScaleGroup, ...]
    key: Axis  # incoming weight whose rows give the sorting key
    blocks: int = 1

    @property
    def block_width(self) -> int:
        return self.width // self.blocks


class StructureFields(Protocol):
    """What the plain view reads of a structure (`symbnn.symmetry.structure.Symmetry` has
    it): the plain view sits below the structure, which builds it, so it names no class of
    the structure's module; it rewrites a structure with `dataclasses.replace`."""

    groups: tuple[UnitGroup, ...]
    shapes: dict[str, tuple[int, ...]]
    mass_tensors: tuple[str, ...]
    output_bias: str | None
    output_weight: str | None

    @property
    def is_plain(self) -> bool: ...
