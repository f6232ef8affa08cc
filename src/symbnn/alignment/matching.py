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

Cost. C is built in the weights' float32 (float64 states: float64), one GEMM per tensor axis
the group owns. Each product is kept with the other groups' permutations it used: unchanged
ones are reused, and when only a few of a neighbour's units moved the product is corrected
by a product over those slices alone. A group is solved again only when a group sharing a
tensor with it changed since its last solve (otherwise C and its best permutation are the
same). The assignment is solved on float32 C; its gain is read off C when it exceeds twice
a bound on C's rounding (from the rows' norms), else summed exactly in float64 over the
rows that move, so no change is accepted on rounding noise. J before and after is summed in
float64.

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
from symbnn.threads import torch_threads_for

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


def _matching_dtype(t: torch.Tensor) -> torch.dtype:
    """float64 states are matched in float64, every other state in float32 (float32 weights
    are exact in it; the cost matrices' products are float32 GEMMs)."""
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def _dense(state: State, sym: Symmetry, tensors: Sequence[str]) -> State:
    """float32 (float64) copies of ``tensors``, block-local (grouped conv) input axes expanded
    to the full channel width with zeros off the block diagonal."""
    out = {name: state[name].detach().cpu().to(_matching_dtype(state[name])) for name in tensors}
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
    """The tensors of one network that drive the match, as the dense copies the objective
    reads (`dense_state`). Passed as A to `weight_matching` or `align_state`, it is
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


@dataclass
class _Term:
    """One (pair, tensor, axis) of a unit group: its part A_axis B'_axis^T of the group's cost,
    with B' = B with the other groups' permutations applied to the tensor's other axes."""

    a: torch.Tensor  # A with the group's axis first (contiguous)
    b: torch.Tensor  # B with the group's axis first (contiguous)
    others: tuple[tuple[int, str], ...]  # (dimension of ``a`` and ``b``, group) of the other axes
    cached: torch.Tensor | None = None  # the last part computed ...
    key: tuple[torch.Tensor, ...] = ()  # ... and the other groups' permutations it used

    def __post_init__(self) -> None:
        width = self.a.shape[0]
        # Row norms (permuting other axes keeps them) bound the rounding of a float32 entry:
        # |fl(a_i . b_j) - a_i . b_j| <= rest * u * |a_i| |b_j| (u: the unit roundoff).
        self.a_norms = torch.linalg.vector_norm(self.a.reshape(width, -1), dim=1).double()
        self.b_norms = torch.linalg.vector_norm(self.b.reshape(width, -1), dim=1).double()

    def error_bound(
        self, rows: torch.Tensor, new: torch.Tensor, old: torch.Tensor, parts: int
    ) -> float:
        """A bound on the rounding of this part in the gain of moving ``rows`` from units
        ``old`` of B to ``new``, read off a cost matrix that sums ``parts`` parts (each sum
        adds u of the part; 1.01: the norms' own rounding). The corrections of a kept part
        add rounding of the same order: `_Problem.gain` keeps a factor 2 over this bound."""
        u = torch.finfo(self.a.dtype).eps / 2
        near = self.b_norms[new] + self.b_norms[old]
        return 1.01 * (self.a[0].numel() + parts) * u * float((self.a_norms[rows] * near).sum())

    def part(self, perms: Mapping[str, torch.Tensor]) -> torch.Tensor:
        key = tuple(perms[g] for _, g in self.others)
        if self.cached is not None:
            moved = [
                i
                for i, (old, new) in enumerate(zip(self.key, key, strict=True))
                if old is not new and not torch.equal(old, new)
            ]
            if not moved:
                return self.cached
            if len(self.others) == 1 and self._correct(key[0]):
                self.key = key
                return self.cached
        b = self.b
        for dim, group in self.others:
            b = b.index_select(dim, perms[group])
        width = self.a.shape[0]
        self.cached = self.a.reshape(width, -1) @ b.reshape(width, -1).T
        self.key = key
        return self.cached

    def rows(self, perms: Mapping[str, torch.Tensor], rows: torch.Tensor, units: torch.Tensor):
        """float64 sums of A[rows[r]] * B'[units[r]] over r: the exact part of J that these
        (aligned unit, unit of B) pairs contribute through this tensor."""
        b = self.b.index_select(0, units)
        for dim, group in self.others:
            b = b.index_select(dim, perms[group])
        return torch.dot(self.a.index_select(0, rows).reshape(-1).double(), b.reshape(-1).double())

    def _correct(self, perm: torch.Tensor) -> bool:
        """Update the cached part in place when only a few of the other group's units moved:
        B' changes in those slices only, so the part changes by A_s (B_new - B_old)_s^T over
        them (a product as many times smaller as units stayed). False when too many moved."""
        dim = self.others[0][0]
        where = torch.nonzero(self.key[0] != perm)[:, 0]
        if 2 * len(where) > len(perm):
            return False
        width = self.a.shape[0]
        change = self.b.index_select(dim, perm[where]) - self.b.index_select(
            dim, self.key[0][where]
        )
        left = self.a.index_select(dim, where)
        self.cached.addmm_(left.reshape(width, -1), change.reshape(width, -1).T)
        return True


class _Problem:
    """The objective J and each group's cost matrix: one product per tensor axis the group
    owns, each kept with the permutations it was computed with and recomputed (or corrected)
    only when one of them changed."""

    def __init__(self, sym: Symmetry, pairs: Sequence[tuple[State, State]]) -> None:
        self.sym = sym
        self.axes = _matched_axes(sym)
        self.pairs = [(dense_state(a, sym), dense_state(b, sym)) for a, b in pairs]
        self.terms: dict[str, list[_Term]] = {g.name: [] for g in sym.groups}
        self.neighbours: dict[str, set[str]] = {g.name: set() for g in sym.groups}
        for a, b in self.pairs:
            for name, axes in self.axes.items():
                for axis, owner in axes:
                    others = tuple((d + 1 if d < axis else d, g) for d, g in axes if g != owner)
                    self.neighbours[owner].update(g for _, g in others)
                    term = _Term(
                        a[name].movedim(axis, 0).contiguous(),
                        b[name].movedim(axis, 0).contiguous(),
                        others,
                    )
                    self.terms[owner].append(term)

    def permuted(
        self, b: State, name: str, perms: Mapping[str, torch.Tensor], skip: str | None
    ) -> torch.Tensor:
        t = b[name]
        for axis, group in self.axes[name]:
            if group != skip:
                t = t.index_select(axis, perms[group])
        return t

    def objective(self, perms: Mapping[str, torch.Tensor]) -> float:
        """J(perms), accumulated in float64."""
        return float(
            sum(
                torch.dot(
                    a[name].reshape(-1).double(),
                    self.permuted(b, name, perms, None).reshape(-1).double(),
                )
                for a, b in self.pairs
                for name in self.axes
            )
        )

    def cost(self, group: UnitGroup, perms: Mapping[str, torch.Tensor]) -> np.ndarray:
        """C[i, j]: the objective's part linear in the group's permutation when unit i of
        aligned B is unit j of B (float64 for the assignment)."""
        parts = [t.part(perms) for t in self.terms[group.name]]
        if not parts:
            return np.zeros((group.width, group.width))
        total = parts[0].clone()
        for part in parts[1:]:
            total += part
        return total.double().numpy()

    def gain(
        self,
        group: UnitGroup,
        perms: Mapping[str, torch.Tensor],
        new: torch.Tensor,
        cost: np.ndarray,
    ) -> float:
        """J(perms with the group's permutation ``new``) - J(perms): read off the float32
        ``cost`` when it exceeds twice the bound on that matrix's rounding (it is then surely
        a gain), else summed again in float64 over the rows that move, so that a change is
        never accepted on rounding noise and the sweeps cannot cycle."""
        old = perms[group.name]
        rows = torch.nonzero(new != old)[:, 0]
        if len(rows) == 0:
            return 0.0
        terms = self.terms[group.name]
        index = rows.numpy()
        approx = float(cost[index, new[rows].numpy()].sum() - cost[index, old[rows].numpy()].sum())
        bound = sum(t.error_bound(rows, new[rows], old[rows], len(terms)) for t in terms)
        if approx > 2 * bound:
            return approx
        return float(
            sum(t.rows(perms, rows, new[rows]) - t.rows(perms, rows, old[rows]) for t in terms)
        )


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
    """The group's best permutation with the others fixed, and the objective's exact gain
    (J is linear in it: only the rows that move count)."""
    cost = problem.cost(group, perms)
    if group.blocks == 1:
        new = torch.from_numpy(_assign(cost))
    else:
        new = _within_blocks(cost, group, _block_map(perms[group.name], group))
    return new, problem.gain(group, perms, new, cost)


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
    one alignment (e.g. (mean_A, mean_B) and (std_A, std_B)).

    A group (or coupling) is solved again only when a group sharing a tensor with it changed
    since its last solve: otherwise its cost matrix is the same and its permutation still
    the best, so skipping it changes nothing but the time."""
    if not pairs:
        raise ValueError("weight_matching needs at least one (A, B) pair of states")
    if max_sweeps < 1:
        raise ValueError(f"max_sweeps must be >= 1, got {max_sweeps}")
    problem = _Problem(
        sym.plain.sym, [(dense_state(a, sym), dense_state(b, sym)) for a, b in pairs]
    )
    # A sweep's products: below SMALL_PROBLEM (an MLP's, OptuNet's) torch's second thread
    # costs more in hand-offs than it gains; a ResNet's GEMMs use every thread.
    work = sum(t.a.numel() * t.a.shape[0] for terms in problem.terms.values() for t in terms)
    with torch_threads_for(work):
        return _descend(problem, sym, max_sweeps)


def _descend(problem: _Problem, sym: Symmetry, max_sweeps: int) -> Alignment:
    """`weight_matching`'s coordinate descent on a prepared problem."""
    perms = {g.name: torch.arange(g.width) for g in sym.groups}
    before = current = problem.objective(perms)
    order = topological_group_order(problem.sym)
    stale = {g.name for g in sym.groups}  # groups whose cost changed since their last solve
    converged, sweeps = False, 0
    for sweeps in range(1, max_sweeps + 1):  # noqa: B007 (the count is returned)
        changed, done = False, set()
        for g in order:
            if g.name in done:
                continue
            coupling = problem.sym.coupling_of(g.name)
            names = tuple(coupling) if coupling else (g.name,)
            done.update(names)
            if stale.isdisjoint(names):
                continue
            stale.difference_update(names)
            trial = dict(perms)
            if coupling:
                trial.update(_update_coupling(problem, coupling, perms))
                value = problem.objective(trial)
            else:
                trial[g.name], gain = _update_group(problem, g, perms)
                value = current + gain
            if _improves(value, current):
                for name in names:
                    if not torch.equal(trial[name], perms[name]):
                        stale.update(problem.neighbours[name])
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
