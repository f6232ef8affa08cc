"""The minimum scaled network mass problem as data (SPEC section 3, paper 3.6 and C.7).

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
to 0 or infinity and the minimum is not attained (SPEC: strict convexity needs neither).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from symbnn.symmetry.operators import as_stack
from symbnn.symmetry.structure import INCOMING_ROLES, Symmetry


@dataclass
class Term:
    tensor: str
    q: torch.Tensor             # (n, rows, cols) float64, squared weights
    mask: torch.Tensor          # (rows, cols) bool, entries that exist (grouped convs: own block)
    out_var: int | None         # variable scaling the rows (None: fixed at 1)
    in_var: int | None          # variable dividing the columns (None: fixed at 1)


@dataclass
class MassProblem:
    names: list[str]            # variable scale groups
    widths: list[int]
    terms: list[Term]
    n: int

    def ones(self) -> list[torch.Tensor]:
        device = self.terms[0].q.device
        return [torch.ones(self.n, w, dtype=torch.float64, device=device) for w in self.widths]

    def incoming(self, s2: list[torch.Tensor] | None, v: int) -> torch.Tensor:
        """A_v: per unit sum_j Q[i, j] / s_in[j]^2 over terms whose rows v scales (s = 1 if None)."""
        total = torch.zeros(self.n, self.widths[v], dtype=torch.float64, device=self.terms[0].q.device)
        for t in self.terms:
            if t.out_var == v:
                total = total + (t.q.sum(2) if t.in_var is None or s2 is None else
                                 torch.matmul(t.q, (1.0 / s2[t.in_var]).unsqueeze(2)).squeeze(2))
        return total

    def outgoing(self, s2: list[torch.Tensor] | None, v: int) -> torch.Tensor:
        """B_v: per unit sum_k s_out[k]^2 Q[k, i] over terms whose columns v divides (s = 1 if None)."""
        total = torch.zeros(self.n, self.widths[v], dtype=torch.float64, device=self.terms[0].q.device)
        for t in self.terms:
            if t.in_var == v:
                total = total + (t.q.sum(1) if t.out_var is None or s2 is None else
                                 torch.matmul(s2[t.out_var].unsqueeze(1), t.q).squeeze(1))
        return total

    def mass(self, s2: list[torch.Tensor] | None = None) -> torch.Tensor:
        total = torch.zeros(self.n, dtype=torch.float64, device=self.terms[0].q.device)
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
        worst = torch.zeros(self.n, dtype=torch.float64, device=self.terms[0].q.device)
        for v in range(len(self.names)):
            ratio = s2[v] ** 2 * self.incoming(s2, v) / self.outgoing(s2, v)
            worst = torch.maximum(worst, ratio.log().abs().amax(dim=1))
        return worst

    def degenerate_units(self) -> list[tuple[str, str, torch.Tensor]]:
        """(variable, side, (n, width) bool) for units with no incoming or no outgoing mass."""
        found = []  # zero patterns do not depend on the scales: look at s = 1
        for v, name in enumerate(self.names):
            for side, values in (("incoming", self.incoming(None, v)), ("outgoing", self.outgoing(None, v))):
                zero = values == 0
                if zero.any():
                    found.append((name, side, zero))
        return found

    def degenerate(self) -> torch.Tensor:
        mask = torch.zeros(self.n, dtype=torch.bool, device=self.terms[0].q.device)
        for _, _, zero in self.degenerate_units():
            mask |= zero.any(dim=1)
        return mask

    def subset(self, rows: torch.Tensor) -> MassProblem:
        terms = [Term(t.tensor, t.q[rows], t.mask, t.out_var, t.in_var) for t in self.terms]
        return MassProblem(self.names, self.widths, terms, int(rows.numel()))


def _squared_rows(w: torch.Tensor) -> torch.Tensor:
    """(n, rows, cols) squared weights summed over kernel entries, accumulated in float64."""
    if w.dim() == 2:
        return (w.to(torch.float64) ** 2).unsqueeze(2)   # BatchNorm gamma: one weight per unit
    if w.dim() == 3:
        return w.to(torch.float64) ** 2
    kernel = tuple(range(3, w.dim()))
    return torch.linalg.vector_norm(w, dim=kernel, dtype=torch.float64) ** 2


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
                col_owner[a.tensor] = index[s.name] if s.name in index else None
                blocks[a.tensor] = a.blocks
    terms = []
    for name in sym.mass_tensors:
        q = _squared_rows(stacked[name].to(device) if device is not None else stacked[name])
        mask = torch.ones(q.shape[1:], dtype=torch.bool, device=q.device)
        b = blocks.get(name, 1)
        if b > 1:
            # Grouped conv: row o only reads its block's channels; expand to the dense layout.
            rows, local = q.shape[1], q.shape[2]
            block_of_row = torch.arange(rows, device=q.device) // (rows // b)
            cols = block_of_row[:, None] * local + torch.arange(local, device=q.device)[None, :]
            dense = torch.zeros(q.shape[0], rows, local * b, dtype=q.dtype, device=q.device)
            q = dense.scatter(2, cols.expand(q.shape[0], -1, -1), q)
            mask = torch.zeros(rows, local * b, dtype=torch.bool, device=q.device)
            mask[torch.arange(rows, device=q.device)[:, None], cols] = True
        terms.append(Term(name, q, mask, row_owner.get(name), col_owner.get(name)))
    widths = [sym.unit_group_of(s.name).width for s in variables]
    n = next(iter(stacked.values())).shape[0]
    return MassProblem([s.name for s in variables], widths, terms, n)
