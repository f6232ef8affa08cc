"""The minimum scaled network mass problem as data (docs/maths.md, section 3, paper 3.6 and C.7).

The mass is the squared L2 norm of the weights, biases excluded. For a network with
BatchNorm (ResNet-18) the BatchNorm gammas count as weights and the betas as biases: that is
what weight decay sees in the usual recipes, and without gamma the BatchNorm output scales
would have no incoming mass and the problem no minimum. The scales of conv outputs feeding
BatchNorm (``absorbed_by_bn``) are not variables: the network is invariant to them and the
mass falls without bound as they shrink, so min-mass keeps them at 1.

Under scales s (one vector per variable scale group) the mass is

    M(s) = sum_terms sum_{i,j} Q[i, j] * s_out[i]^2 / s_in[j]^2

with Q the squared weights summed over kernel entries (dense over a grouped conv's blocks).
A sample is degenerate when a unit has no incoming or no outgoing mass: its scale then runs
to 0 or infinity and the minimum is not attained (docs/maths.md, section 3: strict convexity needs neither).

On the CPU the terms' Q are views into one (n, entries) buffer, and the mass, the balance and
the degenerate-unit check run as one compiled pass over it: a store of small networks
(OptuNet: 80 weights) otherwise spends its time in the overhead of dozens of tiny tensor
operations per call. On other devices they are tensor operations per term.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

import numba
import numpy as np
import torch

from symbnn.symmetry.operators import as_stack
from symbnn.symmetry.structure import INCOMING_ROLES, Symmetry


@dataclass
class Term:
    tensor: str
    q: torch.Tensor  # (n, rows, cols) float64, squared weights
    mask: torch.Tensor  # (rows, cols) bool, entries that exist (grouped convs: own block)
    out_var: int | None  # variable scaling the rows (None: fixed at 1)
    in_var: int | None  # variable dividing the columns (None: fixed at 1)


@dataclass
class FlatTerms:
    """Every term's Q as one (n, entries) float64 array (row-major per term) and where each
    term sits in it; -1 marks a side fixed at 1. The layout the compiled loops read."""

    q: np.ndarray
    out_var: np.ndarray
    in_var: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    offset: np.ndarray
    var_offset: np.ndarray  # (n_vars + 1,) first unit of each variable in an (n, units) array


@dataclass
class MassProblem:
    names: list[str]  # variable scale groups
    widths: list[int]
    terms: list[Term]
    n: int
    _flat: FlatTerms | None = field(default=None, repr=False, compare=False)
    _at_one: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def device(self) -> torch.device:
        return self.terms[0].q.device

    @property
    def on_cpu(self) -> bool:
        return self.device.type == "cpu"

    def flat(self) -> FlatTerms:
        """The CPU layout; built once (mass_problem and subset build it with the terms)."""
        if self._flat is None:
            q = torch.cat([t.q.reshape(self.n, -1) for t in self.terms], dim=1)
            self._flat = _flat_terms(q.numpy(), self.terms, self.widths)
        return self._flat

    def _stacked(self, s2: list[torch.Tensor]) -> np.ndarray:
        """Scales as one C-ordered (n, units) float64 array, the layout of `flat`."""
        if not s2:  # no variables (no scaling symmetry): nothing to stack
            return np.ones((self.n, 0))
        return np.ascontiguousarray(
            torch.cat([s.reshape(self.n, -1) for s in s2], dim=1).to(torch.float64).numpy()
        )

    def _side_sums(self, s2_all: np.ndarray | None):
        """(incoming (n, units), outgoing (n, units), mass (n,)) at stacked scales (s = 1 if
        None), one compiled pass."""
        f = self.flat()
        if s2_all is None:
            if self._at_one is None:  # mass before and the degenerate check both need it
                self._at_one = self._side_sums(np.ones((self.n, int(f.var_offset[-1]))))
            return self._at_one
        return _side_sums(f.q, f.out_var, f.in_var, f.rows, f.cols, f.offset, f.var_offset, s2_all)

    def ones(self) -> list[torch.Tensor]:
        return [torch.ones(self.n, w, dtype=torch.float64, device=self.device) for w in self.widths]

    def incoming(self, s2: list[torch.Tensor] | None, v: int) -> torch.Tensor:
        """A_v: per unit sum_j Q[i, j] / s_in[j]^2 over terms whose rows v scales (s = 1 if None)."""
        total = torch.zeros(self.n, self.widths[v], dtype=torch.float64, device=self.device)
        for t in self.terms:
            if t.out_var == v:
                total = total + (
                    t.q.sum(2)
                    if t.in_var is None or s2 is None
                    else torch.matmul(t.q, (1.0 / s2[t.in_var]).unsqueeze(2)).squeeze(2)
                )
        return total

    def outgoing(self, s2: list[torch.Tensor] | None, v: int) -> torch.Tensor:
        """B_v: per unit sum_k s_out[k]^2 Q[k, i] over terms whose columns v divides (s = 1 if None)."""
        total = torch.zeros(self.n, self.widths[v], dtype=torch.float64, device=self.device)
        for t in self.terms:
            if t.in_var == v:
                total = total + (
                    t.q.sum(1)
                    if t.out_var is None or s2 is None
                    else torch.matmul(s2[t.out_var].unsqueeze(1), t.q).squeeze(1)
                )
        return total

    def mass(self, s2: list[torch.Tensor] | None = None) -> torch.Tensor:
        if self.on_cpu:
            at = None if s2 is None else self._stacked(s2)
            return torch.from_numpy(self._side_sums(at)[2].copy())
        total = torch.zeros(self.n, dtype=torch.float64, device=self.device)
        for t in self.terms:
            q = t.q
            if s2 is not None and t.out_var is not None:
                q = q * s2[t.out_var].unsqueeze(2)
            if s2 is not None and t.in_var is not None:
                q = q / s2[t.in_var].unsqueeze(1)
            total = total + q.sum(dim=(1, 2))
        return total

    def balance(self, s2: list[torch.Tensor]) -> torch.Tensor:
        """(n,) max over units of |log(incoming mass / outgoing mass)|: zero at the optimum
        (the gradient in log-scale is twice incoming minus outgoing)."""
        if self.on_cpu:
            s2_all = self._stacked(s2)
            incoming, outgoing, _ = self._side_sums(s2_all)
            return torch.from_numpy(
                np.abs(np.log(s2_all * s2_all * incoming / outgoing)).max(axis=1)
            )
        worst = torch.zeros(self.n, dtype=torch.float64, device=self.device)
        for v in range(len(self.names)):
            ratio = s2[v] ** 2 * self.incoming(s2, v) / self.outgoing(s2, v)
            worst = torch.maximum(worst, ratio.log().abs().amax(dim=1))
        return worst

    def degenerate_units(self) -> list[tuple[str, str, torch.Tensor]]:
        """(variable, side, (n, width) bool) for units with no incoming or no outgoing mass."""
        found = []  # zero patterns do not depend on the scales: look at s = 1
        if self.on_cpu:
            incoming, outgoing, _ = self._side_sums(None)
            if (incoming > 0).all() and (outgoing > 0).all():
                return found
            off = self.flat().var_offset
            for v, name in enumerate(self.names):
                for side, values in (("incoming", incoming), ("outgoing", outgoing)):
                    zero = torch.from_numpy(values[:, off[v] : off[v + 1]] == 0)
                    if zero.any():
                        found.append((name, side, zero))
            return found
        for v, name in enumerate(self.names):
            for side, values in (
                ("incoming", self.incoming(None, v)),
                ("outgoing", self.outgoing(None, v)),
            ):
                zero = values == 0
                if zero.any():
                    found.append((name, side, zero))
        return found

    def degenerate(self) -> torch.Tensor:
        mask = torch.zeros(self.n, dtype=torch.bool, device=self.device)
        for _, _, zero in self.degenerate_units():
            mask |= zero.any(dim=1)
        return mask

    def subset(self, rows: torch.Tensor) -> MassProblem:
        return _problem(self.names, self.widths, [t.q[rows] for t in self.terms], self.terms)


def _problem(names, widths, qs: list[torch.Tensor], like: list[Term]) -> MassProblem:
    """A problem whose terms (as ``like``, with these Q) are views into one flat buffer on the
    CPU, so that the compiled loops read them without a copy."""
    n = qs[0].shape[0]
    if qs[0].device.type == "cpu":
        flat = torch.cat([q.reshape(n, -1) for q in qs], dim=1)
        views, start = [], 0
        for q in qs:
            size = q.shape[1] * q.shape[2]
            views.append(flat[:, start : start + size].view(n, q.shape[1], q.shape[2]))
            start += size
        terms = [Term(t.tensor, v, t.mask, t.out_var, t.in_var) for t, v in zip(like, views)]
        return MassProblem(names, widths, terms, n, _flat_terms(flat.numpy(), terms, widths))
    terms = [Term(t.tensor, q, t.mask, t.out_var, t.in_var) for t, q in zip(like, qs)]
    return MassProblem(names, widths, terms, n)


def _flat_terms(q: np.ndarray, terms: list[Term], widths: list[int]) -> FlatTerms:
    sizes = [t.q.shape[1] * t.q.shape[2] for t in terms]

    def ints(xs):
        return np.asarray(xs, dtype=np.int64)

    return FlatTerms(
        q,
        ints([-1 if t.out_var is None else t.out_var for t in terms]),
        ints([-1 if t.in_var is None else t.in_var for t in terms]),
        ints([t.q.shape[1] for t in terms]),
        ints([t.q.shape[2] for t in terms]),
        ints(np.cumsum([0, *sizes[:-1]])),
        ints(np.cumsum([0, *widths])),
    )


# Reassociation lets LLVM vectorise the row sums; NaN and infinity keep their IEEE meaning.
@numba.njit(cache=True, fastmath={"reassoc", "contract", "nsz"})
def _side_sums(q, out_var, in_var, rows, cols, offset, var_offset, s2):
    """Per sample: each unit's incoming mass A (sum_j Q[i, j] / s_in[j]^2 over the terms whose
    rows it scales), outgoing mass B (sum_k s_out[k]^2 Q[k, i] over the terms whose columns it
    divides; scales excluded from both) and the total mass. Plain float64 arithmetic: NaN
    scales (degenerate samples) give NaN."""
    n, units = s2.shape
    incoming = np.zeros((n, units))
    outgoing = np.zeros((n, units))
    mass = np.zeros(n)
    inv = np.empty(units)
    for r in range(n):
        qr, sr, a, b = q[r], s2[r], incoming[r], outgoing[r]
        for u in range(units):
            inv[u] = 1.0 / sr[u]
        total = 0.0
        for t in range(out_var.shape[0]):
            o, i, nr, nc = out_var[t], in_var[t], rows[t], cols[t]
            o0 = var_offset[o] if o >= 0 else 0
            i0 = var_offset[i] if i >= 0 else 0
            for k in range(nr):
                base = offset[t] + k * nc
                row = 0.0
                if i >= 0:
                    so = sr[o0 + k] if o >= 0 else 1.0
                    for j in range(nc):
                        x = qr[base + j]
                        b[i0 + j] += so * x
                        row += x * inv[i0 + j]
                else:
                    for j in range(nc):
                        row += qr[base + j]
                if o >= 0:
                    a[o0 + k] += row
                    total += sr[o0 + k] * row
                else:
                    total += row
        mass[r] = total
    return incoming, outgoing, mass


def _squared_rows(w: torch.Tensor) -> torch.Tensor:
    """(n, rows, cols) squared weights summed over kernel entries, accumulated in float64."""
    if w.dim() == 2:
        return (w.to(torch.float64) ** 2).unsqueeze(2)  # BatchNorm gamma: one weight per unit
    if w.dim() == 3:
        return w.to(torch.float64) ** 2
    kernel = tuple(range(3, w.dim()))
    return torch.linalg.vector_norm(w, dim=kernel, dtype=torch.float64) ** 2


def _block_diagonal(q: torch.Tensor, b: int) -> torch.Tensor:
    """(n, rows, local) grouped-conv blocks -> (n, rows, b * local), zero off the diagonal."""
    n, rows, local = q.shape
    dense = torch.zeros(n, b, rows // b, b, local, dtype=q.dtype, device=q.device)
    dense.diagonal(dim1=1, dim2=3).copy_(q.view(n, b, rows // b, local).permute(0, 2, 3, 1))
    return dense.view(n, rows, b * local)


@functools.lru_cache(maxsize=64)
def _block_mask(rows: int, cols: int, b: int) -> torch.Tensor:
    return _block_diagonal(torch.ones(1, rows, cols // b), b)[0] > 0


def mass_problem(state: Mapping[str, torch.Tensor], sym: Symmetry, device=None) -> MassProblem:
    """The min-mass problem of one network or a stack (float64 throughout)."""
    stacked, _ = as_stack(state, sym)
    variables = [s for s in sym.scale_groups if not s.absorbed_by_bn]
    index = {s.name: i for i, s in enumerate(variables)}
    row_owner, col_owner, blocks = {}, {}, {}
    for s in sym.scale_groups:
        for a in s.axes:
            if a.axis == 0 and a.role in INCOMING_ROLES:
                row_owner[a.tensor] = index.get(s.name)
            if a.role == "out":
                col_owner[a.tensor] = index.get(s.name)
                blocks[a.tensor] = a.blocks
    terms, qs = [], []
    for name in sym.mass_tensors:
        q = _squared_rows(stacked[name].to(device) if device is not None else stacked[name])
        mask = torch.ones(q.shape[1:], dtype=torch.bool, device=q.device)
        b = blocks.get(name, 1)
        if b > 1:
            # Grouped conv: row o only reads its block's channels; expand to the dense layout.
            q = _block_diagonal(q, b)
            mask = _block_mask(q.shape[1], q.shape[2], b).to(q.device)
        terms.append(Term(name, q, mask, row_owner.get(name), col_owner.get(name)))
        qs.append(q)
    widths = [sym.unit_group_of(s.name).width for s in variables]
    return _problem([s.name for s in variables], widths, qs, terms)
