"""Canonical form: remove scaling, permutation and softmax symmetries (docs/maths.md, section 2, paper C.2).

Order: every scale group is normalised (input side first), then every unit group is sorted
(input side first), then the softmax's additive freedom is removed: each column of the
output weight is centred over the outputs (W_L <- W_L - 1 mean_rows(W_L), every column sums
to 0) and the output bias shifted to sum ``softmax_total`` (default 1). The result computes
the same function, and canonicalize(T(theta)) == canonicalize(theta) for every symmetry T
(permutations, scales, and W_L + 1 v^T, b + c 1), up to float rounding and ties in the
sorting key. Centring commutes with the last hidden layer's moves: a permutation or a
positive scale of the units feeding the output moves or scales whole columns, and so moves
or scales each column's mean with it.

Structures that slice tensors (`Symmetry.is_plain` false: DenseNet's concatenations, a
flattened map feeding a linear layer) are scaled and sorted on their plain view
(`Symmetry.plain`) and joined back; the softmax step reads whole output rows and runs in the
model's own layout.

Choices this module makes:

* Norms are taken over a scale group's incoming weights: conv/linear rows, and for a
  BatchNorm output unit its gammas (several when channels are tied by residual sums). Biases
  are divided but do not enter the norm.
* ``scale="unitstd"`` divides conv/linear rows by their standard deviation (ddof 0);
  BatchNorm output units are still set to unit norm of gamma (a single gamma has no spread).
* The sorting key reads the unit group's key rows only (the first conv/linear feeding the
  channel: the stem or projection conv for a residual stream), never gamma, whose unit norm
  would make every key equal.
* Grouped convolutions: units are sorted within blocks; the blocks of a coupling are then
  ordered by their best key on the coupling's input-side group, which moves the partner
  group's blocks too.
* Degenerate units (all incoming weights zero, so no scale can normalise them) raise
  ValueError; ``on_dead="keep"`` leaves them unscaled (their outgoing weights then keep
  whatever scale they had, so the canonical form is not scale-invariant for those units).
  NaN or infinite weights always raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from symbnn.settings import SymmetryRemoval
from symbnn.symmetry.operators import (
    apply_permutations,
    apply_scales,
    as_stack,
    centre_softmax,
    permute_tensors,
    unstack,
)
from symbnn.symmetry.structure import (
    Symmetry,
    UnitGroup,
    topological_group_order,
    topological_scale_order,
)
from symbnn.threads import torch_threads_for

# library defaults are the settings layer's
SYMMETRY = SymmetryRemoval()


SCALE_MODES = SymmetryRemoval.choices("scale")
KEYS = SymmetryRemoval.choices("key")


@dataclass
class Canonical:
    """A canonical state and what produced it:
    state == shift_output(permute(scale(theta, scales), perms), softmax_shift, softmax_weight_shift)
    (`symbnn.symmetry.operators`)."""

    state: dict[str, torch.Tensor]
    perms: dict[str, torch.Tensor]  # (n, width) int64, result unit i = scaled unit perms[i]
    scales: dict[str, torch.Tensor]  # (n, width), indexed like the input's units
    softmax_shift: torch.Tensor | None  # (n,) constant added to the output bias
    # (n, *row) vector added to every row of the output weight (minus the mean row)
    softmax_weight_shift: torch.Tensor | None = None


def check_finite(state: Mapping[str, torch.Tensor], sym: Symmetry, sample_offset: int = 0) -> None:
    """Raise ValueError naming the tensors and samples (numbered from ``sample_offset``)
    holding NaN or infinite values."""
    for name in sym.tensors:
        t = state[name]
        if t.is_floating_point():
            flat = t.reshape(t.shape[0], -1)
            if bool(torch.isfinite(flat.sum(dim=1)).all()):
                continue  # NaN and inf propagate through a sum: the fast path is exact
            bad = ~torch.isfinite(flat).all(dim=1)
            if bad.any():
                rows = (bad.nonzero().flatten() + sample_offset).tolist()
                raise ValueError(
                    f"{name} holds NaN or infinite values in sample(s) {rows[:10]}"
                    f"{' ...' if len(rows) > 10 else ''}"
                )


def _rows(state: Mapping[str, torch.Tensor], tensor: str, axis: int) -> torch.Tensor:
    """(n, width, d): each unit's entries of ``tensor`` along ``axis``."""
    t = state[tensor].movedim(axis + 1, 1)
    return t.reshape(t.shape[0], t.shape[1], -1)


def _normalizers(state, group, mode: str, on_dead: str, sample_offset: int) -> torch.Tensor:
    incoming = torch.cat([_rows(state, a.tensor, a.axis) for a in group.incoming], dim=2)
    use_std = mode == "unitstd" and all(a.role == "in" for a in group.incoming)
    if use_std and incoming.shape[2] < 2:
        raise ValueError(
            f"scale group {group.name}: one incoming weight per unit has no standard "
            f"deviation; use scale='unitnorm'"
        )
    r = incoming.std(dim=2, correction=0) if use_std else incoming.norm(dim=2)
    dead = r == 0
    if dead.any():
        samples, units = dead.nonzero(as_tuple=True)
        what = "constant" if use_std else "all-zero"
        if on_dead == "raise":
            raise ValueError(
                f"scale group {group.name}: unit(s) {sorted(set(units.tolist()))[:10]} of sample(s) "
                f"{sorted(set((samples + sample_offset).tolist()))[:10]} have {what} incoming weights, so no scale "
                f"normalises them (dead units); pass on_dead='keep' to leave them unscaled"
            )
        r = torch.where(dead, torch.ones_like(r), r)
    return 1.0 / r


def _sort_keys(state, sym: Symmetry, group: UnitGroup, key: str, perms) -> torch.Tensor:
    # The key rows as the sequential algorithm would see them: with every permutation chosen
    # so far applied to this one tensor (the whole state is permuted once, at the end).
    current = permute_tensors({group.key.tensor: state[group.key.tensor]}, sym, perms)
    rows = _rows(current, group.key.tensor, group.key.axis)
    # "first": the weight from the first input unit (conv: top-left entry of the first input
    # channel, which flattening puts first); "max": the largest incoming weight.
    return rows[:, :, 0] if key == "first" else rows.max(dim=2).values


def _within_blocks(keys: torch.Tensor, g: UnitGroup) -> torch.Tensor:
    n = keys.shape[0]
    local = keys.reshape(n, g.blocks, g.block_width).argsort(dim=2, descending=True, stable=True)
    offsets = torch.arange(g.blocks, device=keys.device)[None, :, None] * g.block_width
    return (local + offsets).reshape(n, g.width)


def _block_move(sigma: torch.Tensor, g: UnitGroup) -> torch.Tensor:
    """Permutation of g's units moving block sigma[k] to position k."""
    local = torch.arange(g.block_width, device=sigma.device)
    return (sigma[:, :, None] * g.block_width + local).reshape(sigma.shape[0], g.width)


def _compose(first: torch.Tensor, then: torch.Tensor) -> torch.Tensor:
    """Index form of applying ``first`` then ``then``."""
    return torch.take_along_dim(first, then, dim=1)


def canonicalize(
    state: Mapping[str, torch.Tensor],
    sym: Symmetry,
    *,
    scale: str = SYMMETRY.scale,
    key: str = SYMMETRY.key,
    softmax_shift: bool = True,
    softmax_total: float = 1.0,
    on_dead: str = "raise",
    sample_offset: int = 0,
) -> Canonical:
    """Canonical form of one network or a stack of networks (see the module docstring).
    ``softmax_shift`` False leaves the output layer's additive freedom in place (weight and
    bias); ``sample_offset`` numbers the samples in error messages (a store block's first row)."""
    if scale not in SCALE_MODES:
        raise ValueError(f"scale must be one of {SCALE_MODES}, got {scale!r}")
    if key not in KEYS:
        raise ValueError(f"key must be one of {KEYS}, got {key!r}")
    if on_dead not in ("raise", "keep"):
        raise ValueError(f"on_dead must be 'raise' or 'keep', got {on_dead!r}")
    device = next(iter(state.values())).device
    with torch_threads_for(sum(state[t].numel() for t in sym.tensors if t in state), device):
        view = sym.plain  # the identity for a plain structure
        current, perms, scales, single = _scale_and_sort(
            view.split(state), view.sym, scale, key, on_dead, sample_offset
        )
        current = view.join(current)
        shift = weight_shift = None
        if softmax_shift and sym.softmax_dof:
            current, shift, weight_shift = centre_softmax(current, sym, softmax_total)
    if single:
        return Canonical(
            unstack(current, True),
            {k: v[0] for k, v in perms.items()},
            {k: v[0] for k, v in scales.items()},
            None if shift is None else shift[0],
            None if weight_shift is None else weight_shift[0],
        )
    return Canonical(current, perms, scales, shift, weight_shift)


def _scale_and_sort(state, sym, scale, key, on_dead, sample_offset):
    """Steps 1 and 2 on a plain structure: (stacked state, perms, scales, was single)."""
    current, single = as_stack(state, sym)
    check_finite(current, sym, sample_offset)
    n = current[sym.tensors[0]].shape[0]
    device = current[sym.tensors[0]].device

    scales: dict[str, torch.Tensor] = {}
    for group in topological_scale_order(sym):
        s = _normalizers(current, group, scale, on_dead, sample_offset)
        current = apply_scales(current, sym, {group.name: s})
        scales[group.name] = s

    perms = {g.name: torch.arange(g.width, device=device).repeat(n, 1) for g in sym.groups}
    for g in topological_group_order(sym):
        coupling = sym.coupling_of(g.name)
        keys = _sort_keys(current, sym, g, key, perms)
        step = _within_blocks(keys, g)
        moves = {g.name: step}
        if coupling and coupling[0] == g.name:
            # Order the coupling's blocks by their best key; every coupled group's blocks move alike.
            sigma = (
                keys.reshape(n, g.blocks, g.block_width)
                .max(dim=2)
                .values.argsort(dim=1, descending=True, stable=True)
            )
            moves = {name: _block_move(sigma, sym.group(name)) for name in coupling}
            moves[g.name] = (
                step.reshape(n, g.blocks, g.block_width)
                .gather(1, sigma[:, :, None].expand(-1, -1, g.block_width))
                .reshape(n, g.width)
            )
        for name, p in moves.items():
            perms[name] = _compose(perms[name], p)
    current = apply_permutations(current, sym, perms)
    return current, perms, scales, single
