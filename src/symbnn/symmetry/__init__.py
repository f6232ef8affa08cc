"""The symmetry engine: weight-space symmetries as data (tied unit groups), their operators,
counting, the canonical form and the min-mass problem (`symbnn.symmetry.minmass`)."""

from symbnn.symmetry.architectures import unit_groups
from symbnn.symmetry.canonical import Canonical, canonicalize, check_finite
from symbnn.symmetry.counting import count_symmetries, total_symmetries
from symbnn.symmetry.derive import structure_differences, symmetry_of
from symbnn.symmetry.operators import (
    apply_permutations,
    apply_scales,
    centre_softmax,
    check_permutations,
    identity_permutations,
    invert_permutations,
    random_output_shifts,
    random_permutations,
    random_scales,
    shift_output,
    shift_softmax,
)
from symbnn.symmetry.structure import Axis, ScaleGroup, Symmetry, UnitGroup

__all__ = [
    "Axis",
    "ScaleGroup",
    "Symmetry",
    "UnitGroup",
    "unit_groups",
    "symmetry_of",
    "structure_differences",
    "apply_permutations",
    "apply_scales",
    "check_permutations",
    "identity_permutations",
    "invert_permutations",
    "random_permutations",
    "random_scales",
    "random_output_shifts",
    "shift_output",
    "shift_softmax",
    "centre_softmax",
    "Canonical",
    "canonicalize",
    "check_finite",
    "count_symmetries",
    "total_symmetries",
]
