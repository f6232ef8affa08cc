"""Weight matching modulo permutations (Git Re-Basin's weight matching, Ainsworth et al. 2023),
on the project's symmetry structure, so one algorithm serves every architecture.

Problem. Given networks A and B of one architecture, find admissible permutations P of B's
unit groups maximising the alignment objective

    J(P) = sum_c sum_t < A_t^(c), (P B)_t^(c) >,

the sum over "channels" c (the weights themselves; or, for a mean-field Gaussian posterior,
its means and its standard deviations) and over the state tensors t that some unit group
moves. For one channel, maximising J is minimising ||A - P B||^2 (the norms do not depend on
P); for means and standard deviations together it is minimising the squared 2-Wasserstein
distance between two diagonal Gaussians, sum ||mu_A - P mu_B||^2 + ||sd_A - P sd_B||^2 (the
objective of Rossi et al.'s alignment of variational posteriors).

Algorithm. Coordinate descent over unit groups: with every other group fixed, J is linear in
one group's permutation, J = sum_i C[i, perm[i]] with C = sum over the group's axes of
A_axis B'_axis^T (B' = B with the other groups' permutations applied), and
`scipy.optimize.linear_sum_assignment` maximises it exactly. Groups are visited in the
structure's input-to-output order (`topological_group_order`); a group's permutation only
changes when J strictly rises, so the sweeps stop (when a whole sweep changes nothing, or
after ``max_sweeps``).

Structure details:
* Only parameter roles enter J ("in", "bias", "out", "bn_weight", "bn_bias"); BatchNorm
  running statistics are buffers that move with their channel but do not drive the match.
* Block-local axes of grouped convolutions are expanded to dense block-diagonal tensors, so
  every axis permutes plainly. Blocks map onto blocks: a grouped layer's permutation is a
  block permutation sigma times within-block assignments (one LSA per block). Coupled groups
  (a grouped conv's input and output channels) share sigma and are updated together: every
  block permutation is tried (blocks! of them; a few for OptuNet), with a few within-block
  rounds for each, and the best J is kept. An uncoupled grouped layer keeps its blocks in
  place, as `symbnn.symmetry.random_permutations` does.
* Structures that slice tensors (`Symmetry.is_plain` false: concatenations, flattened maps)
  are matched on their plain view (`Symmetry.plain`): each state is split into whole-axis
  pieces, so every axis a group owns is whole; the permutations found are the structure's
  own (group names do not change) and move B in its own layout.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from symbnn.settings import Alignment
from symbnn.symmetry.operators import apply_permutations, as_stack
from symbnn.symmetry.structure import Symmetry, UnitGroup, topological_group_order

# library defaults are the settings layer's
ALIGNMENT = Alignment()


MATCH_ROLES = ("in", "bias", "out", "bn_weight", "bn_bias")
MAX_BLOCK_PERMUTATIONS = 5040  # 7 blocks; more would need a smarter block assignment
INNER_ROUNDS = 3  # within-block rounds per candidate block permutation

State = dict[str, torch.Tensor]


@dataclass
class Alignment:
    """Permutations that align B to A (unit i of aligned B is unit ``perms[g][i]`` of B, the
    convention of `symbnn.symmetry.apply_permutations`) and the objective before and after."""

    perms: dict[str, torch.Tensor]
    objective_before: float
    objective_after: float
    sweeps: int
    converged: bool


# ---------------------------------------------------------------- dense single-network tensors


def _single(state: Mapping[str, torch.Tensor], sym: Symmetry) -> State:
    stacked, single = as_stack(state, sym)
    if not single:
        first = next(iter(stacked.values()))
        if first.shape[0] != 1:
            raise ValueError(
                f"weight matching aligns one network at a time, got a stack of {first.shape[0]}"
            )
    return {k: v[0] for k, v in stacked.items()}


def _matched_axes(sym: Symmetry) -> dict[str, list[tuple[int, str]]]:
    """tensor -> [(axis, unit group)] of the axes that drive the match."""
    axes: dict[str, list[tuple[int, str]]] = {}
    for g in sym.groups:
        for a in g.axes:
            if a.role in MATCH_ROLES:
                axes.setdefault(a.tensor, []).append((a.axis, g.name))
    return axes


def _dense(state: State, sym: Symmetry, tensors: Sequence[str]) -> State:
    """float64 copies of ``tensors``, block-local (grouped conv) input axes expanded to the
    full channel width with zeros off the block diagonal."""
    out = {name: state[name].detach().to(torch.float64).cpu() for name in tensors}
    for g in sym.groups:
        for a in g.axes:
            if a.blocks == 1 or a.tensor not in out:
                continue
            t = out[a.tensor]
            rows, local = t.shape[0], t.shape[1]
            dense = torch.zeros((rows, g.width, *t.shape[2:]), dtype=t.dtype)
            per_block = rows // a.blocks
            for k in range(a.blocks):
                dense[k * per_block : (k + 1) * per_block, k * local : (k + 1) * local] = t[
                    k * per_block : (k + 1) * per_block
                ]
            out[a.tensor] = dense
    return out


class DenseState(dict):
    """The tensors of one network that drive the match, as the float64 dense copies the
    objective reads (`dense_state`). Passed as A to `weight_matching` or `align_state`, it is
    used as is: one reference prepared once serves many alignments."""


def dense_state(state: Mapping[str, torch.Tensor], sym: Symmetry) -> DenseState:
    """The dense copies of one network's matched tensors (in the plain view of a structure
    that slices tensors)."""
    if isinstance(state, DenseState):
        return state
    view = sym.plain
    plain = view.sym
    return DenseState(_dense(_single(view.split(state), plain), plain, list(_matched_axes(plain))))


# ---------------------------------------------------------------- the objective and its costs


class _Problem:
    def __init__(self, sym: Symmetry, pairs: Sequence[tuple[State, State]]) -> None:
        self.sym = sym
        self.axes = _matched_axes(sym)
        self.pairs = [(dense_state(a, sym), dense_state(b, sym)) for a, b in pairs]

    def permuted(
        self, b: State, name: str, perms: Mapping[str, torch.Tensor], skip: str | None
    ) -> torch.Tensor:
        t = b[name]
        for axis, group in self.axes[name]:
            if group != skip:
                t = t.index_select(axis, perms[group])
        return t

    def objective(self, perms: Mapping[str, torch.Tensor]) -> float:
        return float(
            sum(
                (a[name] * self.permuted(b, name, perms, None)).sum()
                for a, b in self.pairs
                for name in self.axes
            )
        )

    def cost(self, group: UnitGroup, perms: Mapping[str, torch.Tensor]) -> np.ndarray:
        """C[i, j]: the objective's part linear in the group's permutation when unit i of
        aligned B is unit j of B."""
        c = torch.zeros(group.width, group.width, dtype=torch.float64)
        for a, b in self.pairs:
            for name, axes in self.axes.items():
                for axis, owner in axes:
                    if owner != group.name:
                        continue
                    left = a[name].movedim(axis, 0).reshape(group.width, -1)
                    right = (
                        self.permuted(b, name, perms, group.name)
                        .movedim(axis, 0)
                        .reshape(group.width, -1)
                    )
                    c += left @ right.T
        return c.numpy()


def _assign(cost: np.ndarray) -> np.ndarray:
    rows, cols = linear_sum_assignment(cost, maximize=True)
    out = np.empty(len(rows), dtype=np.int64)
    out[rows] = cols
    return out


def _within_blocks(cost: np.ndarray, group: UnitGroup, sigma: Sequence[int]) -> torch.Tensor:
    """Best permutation mapping block k of aligned B onto block sigma[k] of B."""
    w = group.block_width
    perm = np.empty(group.width, dtype=np.int64)
    for k, target in enumerate(sigma):
        local = _assign(cost[k * w : (k + 1) * w, target * w : (target + 1) * w])
        perm[k * w : (k + 1) * w] = target * w + local
    return torch.from_numpy(perm)


def _block_map(perm: torch.Tensor, group: UnitGroup) -> list[int]:
    return [int(perm[k * group.block_width]) // group.block_width for k in range(group.blocks)]


def _update_group(
    problem: _Problem, group: UnitGroup, perms: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, float]:
    """The group's best permutation with the others fixed, and the objective's gain (J is
    linear in it, so the gain is read off the cost matrix without re-evaluating J)."""
    cost = problem.cost(group, perms)
    if group.blocks == 1:
        new = torch.from_numpy(_assign(cost))
    else:
        new = _within_blocks(cost, group, _block_map(perms[group.name], group))
    rows = np.arange(group.width)
    return new, float(cost[rows, new.numpy()].sum() - cost[rows, perms[group.name].numpy()].sum())


def _update_coupling(
    problem: _Problem, coupling: Sequence[str], perms: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Best block permutation shared by coupled groups, each with its within-block assignments."""
    groups = [problem.sym.group(n) for n in coupling]
    blocks = groups[0].blocks
    if math.factorial(blocks) > MAX_BLOCK_PERMUTATIONS:
        raise ValueError(
            f"coupled groups {tuple(coupling)} have {blocks} blocks: trying all {blocks}! "
            f"block permutations is too many (limit {MAX_BLOCK_PERMUTATIONS})"
        )
    best, best_value = None, -math.inf
    for sigma in itertools.permutations(range(blocks)):
        trial = dict(perms)
        for g in groups:  # move the blocks, keep each block's current within-block offsets
            offsets = perms[g.name] % g.block_width
            base = torch.tensor(sigma).repeat_interleave(g.block_width) * g.block_width
            trial[g.name] = base + offsets
        for _ in range(INNER_ROUNDS):
            for g in groups:
                trial[g.name] = _within_blocks(problem.cost(g, trial), g, sigma)
        value = problem.objective(trial)
        if value > best_value:
            best, best_value = {g.name: trial[g.name] for g in groups}, value
    return best


def _improves(new: float, old: float) -> bool:
    return new > old + 1e-12 * max(1.0, abs(old))


def weight_matching(
    sym: Symmetry,
    pairs: Sequence[tuple[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]]],
    max_sweeps: int = ALIGNMENT.max_sweeps,
) -> Alignment:
    """Permutations of B maximising sum over (A, B) in ``pairs`` of <A, P B> (see module doc).
    ``pairs`` holds one (A, B) pair of single-network state dicts, or several channels of
    one alignment (e.g. (mean_A, mean_B) and (std_A, std_B))."""
    if not pairs:
        raise ValueError("weight_matching needs at least one (A, B) pair of states")
    if max_sweeps < 1:
        raise ValueError(f"max_sweeps must be >= 1, got {max_sweeps}")
    problem = _Problem(
        sym.plain.sym, [(dense_state(a, sym), dense_state(b, sym)) for a, b in pairs]
    )
    perms = {g.name: torch.arange(g.width) for g in sym.groups}
    before = current = problem.objective(perms)
    order = topological_group_order(problem.sym)
    converged, sweeps = False, 0
    for sweeps in range(1, max_sweeps + 1):  # noqa: B007 (the count is returned)
        changed, done = False, set()
        for g in order:
            if g.name in done:
                continue
            coupling = problem.sym.coupling_of(g.name)
            names = tuple(coupling) if coupling else (g.name,)
            done.update(names)
            trial = dict(perms)
            if coupling:
                trial.update(_update_coupling(problem, coupling, perms))
                value = problem.objective(trial)
            else:
                trial[g.name], gain = _update_group(problem, g, perms)
                value = current + gain
            if _improves(value, current):
                perms, current, changed = trial, value, True
        if not changed:
            converged = True
            break
    # Report J evaluated afresh (the running value adds up gains).
    return Alignment(perms, before, problem.objective(perms), sweeps, converged)


def align_state(
    a: Mapping[str, torch.Tensor],
    b: Mapping[str, torch.Tensor],
    sym: Symmetry,
    max_sweeps: int = ALIGNMENT.max_sweeps,
) -> tuple[State, Alignment]:
    """B permuted to match A (every state entry moves, BatchNorm statistics included)."""
    result = weight_matching(sym, [(a, b)], max_sweeps)
    return apply_permutations(b, sym, result.perms), result


def align_gaussian(
    mean_a: Mapping[str, torch.Tensor],
    std_a: Mapping[str, torch.Tensor],
    mean_b: Mapping[str, torch.Tensor],
    std_b: Mapping[str, torch.Tensor],
    sym: Symmetry,
    use_std: bool = True,
    max_sweeps: int = ALIGNMENT.max_sweeps,
) -> tuple[State, State, Alignment]:
    """Align mean-field Gaussian B to A: means and standard deviations permuted together.
    The cost uses both (2-Wasserstein between the diagonal Gaussians), or the means only
    with ``use_std=False``. Entries with no variational factor carry std 0."""
    pairs = [(mean_a, mean_b)] + ([(std_a, std_b)] if use_std else [])
    result = weight_matching(sym, pairs, max_sweeps)
    return (
        apply_permutations(mean_b, sym, result.perms),
        apply_permutations(std_b, sym, result.perms),
        result,
    )
