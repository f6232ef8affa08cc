"""Reference min-mass solver: the log-variable convex form in cvxpy (docs/maths.md, section 3).

With u = log s the mass is sum_k q_k exp(2 (u_out(k) - u_in(k))): a sum of exponentials of
affine functions, convex. For a batch of small networks the problem is written once with
the squared weights as a non-negative parameter (DPP), so each further sample only re-solves;
cvxpy's parameter map grows with entries x parameters, so large networks get a fresh problem
with constant weights per sample. The objective is divided by the sample's starting mass so
that solver tolerances are relative.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from symbnn.symmetry.mass import MassProblem

DPP_MAX_ENTRIES = 1_000


@dataclass
class CvxpySolution:
    s2: list[torch.Tensor]
    iterations: torch.Tensor  # solver iterations per sample
    status: list[str]
    converged: torch.Tensor  # status optimal (or optimal_inaccurate, as cvxpy reports it)


def solve_cvxpy(problem: MassProblem, solver: str = "CLARABEL", **solver_options) -> CvxpySolution:
    import cvxpy as cp

    offsets = np.cumsum([0, *problem.widths])
    rows, cols, vals, picks = [], [], [], []
    n_entries = 0
    constant = torch.zeros(problem.n, dtype=torch.float64)
    for t in problem.terms:
        q = t.q.detach().cpu()
        if t.out_var is None and t.in_var is None:
            constant += q.sum(dim=(1, 2))
            continue
        r_idx, c_idx = t.mask.cpu().nonzero(as_tuple=True)
        k = np.arange(n_entries, n_entries + r_idx.numel())
        if t.out_var is not None:
            rows.append(k)
            cols.append(offsets[t.out_var] + r_idx.numpy())
            vals.append(np.full(k.size, 2.0))
        if t.in_var is not None:
            rows.append(k)
            cols.append(offsets[t.in_var] + c_idx.numpy())
            vals.append(np.full(k.size, -2.0))
        picks.append(q[:, r_idx, c_idx])
        n_entries += k.size
    exponent = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n_entries, int(offsets[-1])),
    )
    q_all = torch.cat(picks, dim=1).numpy()
    mass0 = q_all.sum(axis=1) + constant.numpy()

    u = cp.Variable(int(offsets[-1]))
    reuse = problem.n > 1 and n_entries <= DPP_MAX_ENTRIES
    if reuse:
        weights = cp.Parameter(n_entries, nonneg=True)
        prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(weights, cp.exp(exponent @ u)))))

    u_all = np.zeros((problem.n, int(offsets[-1])))
    iterations = torch.zeros(problem.n, dtype=torch.int64)
    status: list[str] = []
    for i in range(problem.n):
        if reuse:
            weights.value = q_all[i] / mass0[i]
        else:
            prob = cp.Problem(
                cp.Minimize(cp.sum(cp.multiply(q_all[i] / mass0[i], cp.exp(exponent @ u))))
            )
        try:
            prob.solve(solver=solver, **solver_options)
            status.append(str(prob.status))
        except cp.error.SolverError as exc:
            status.append(f"solver_error: {exc}")
        if u.value is not None:
            u_all[i] = u.value
        stats = prob.solver_stats
        iterations[i] = (
            int(stats.num_iters) if stats is not None and stats.num_iters is not None else -1
        )
    device = problem.device
    s2 = [
        torch.from_numpy(np.exp(2 * u_all[:, offsets[v] : offsets[v + 1]])).to(device)
        for v in range(len(problem.widths))
    ]
    converged = torch.tensor(
        [s in ("optimal", "optimal_inaccurate") for s in status], device=device
    )
    return CvxpySolution(s2, iterations.to(device), status, converged)
