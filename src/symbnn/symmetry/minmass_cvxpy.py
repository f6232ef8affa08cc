"""Reference min-mass solver: the log-variable convex form in cvxpy (docs/maths.md, section 3.4).

With u = log s the mass is sum_k q_k exp(2 (u_out(k) - u_in(k))). The squared weights enter
the exponent, sum_k exp(a_k . u + log q_k - log M0), not as coefficients in front of it: on
networks rescaled by a random symmetry the q_k span ten orders of magnitude, and as
coefficients they left the interior-point solver at "optimal" with balance residuals up to
0.4 (and at its iteration limit on a 784-64-64-10 MLP). Dividing by the sample's starting
mass M0 (subtracting log M0 in the exponent) makes the solver's tolerances relative.

For a batch of small networks the problem is written once with the log-weights as a
parameter (DPP), so each further sample only re-solves; cvxpy's parameter map grows with
entries x parameters, so larger networks, and samples with zero weights (log 0: the entry is
left out of that sample's problem), get a problem with constant log-weights of their own.

A sample is converged when cvxpy reports a solution (``optimal`` or ``optimal_inaccurate``)
AND its balance residual max |log(incoming / outgoing mass)| (the fast solver's stopping
quantity) is below ``tol``: the status alone said "optimal" at a residual of 0.4.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from symbnn.symmetry.mass import MassProblem

DPP_MAX_ENTRIES = 1_000
# Clarabel's gap and feasibility tolerances (its defaults, 1e-8, left residuals up to 1e-3);
# with these the residual of random and randomly rescaled networks stays around 1e-5, a few
# 1e-4 at worst (docs/maths.md, section 3.4).
CLARABEL_TOLERANCE = 1e-10
# A sample is converged when its balance residual is below this: incoming and outgoing
# masses of every unit agree to 0.1 %.
TOLERANCE = 1e-3
SOLVED = ("optimal", "optimal_inaccurate")


@dataclass
class CvxpySolution:
    s2: list[torch.Tensor]
    iterations: torch.Tensor  # solver iterations per sample
    status: list[str]
    residual: torch.Tensor  # (n,) balance residual at the solution (NaN: no solution)
    converged: torch.Tensor  # status optimal (or optimal_inaccurate) and residual < tol


# Clarabel fails outright ("solver_error") on about one randomly rescaled OptuNet in a hundred;
# shorter interior-point steps (its default fraction is 0.99) solve those: tried once more.
CLARABEL_RETRY = {"max_step_fraction": 0.9}


def _default_options(solver: str) -> dict:
    if solver.upper() == "CLARABEL":
        t = CLARABEL_TOLERANCE
        return {"tol_gap_abs": t, "tol_gap_rel": t, "tol_feas": t}
    return {}


def _solve_once(prob, solver: str, options: dict) -> str:
    import cvxpy as cp

    try:
        with warnings.catch_warnings():
            # "Solution may be inaccurate": the status and the residual report it
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            prob.solve(solver=solver, **options)
        return str(prob.status)
    except cp.error.SolverError as exc:
        return f"solver_error: {exc}"


def solve_cvxpy(
    problem: MassProblem, solver: str = "CLARABEL", tol: float = TOLERANCE, **solver_options
) -> CvxpySolution:
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
    positive = q_all > 0
    with np.errstate(divide="ignore"):
        log_q = np.log(q_all) - np.log(mass0)[:, None]  # -inf where q = 0
    options = {**_default_options(solver), **solver_options}
    retry = solver.upper() == "CLARABEL" and not set(CLARABEL_RETRY) & set(solver_options)

    u = cp.Variable(int(offsets[-1]))
    reuse = problem.n > 1 and n_entries <= DPP_MAX_ENTRIES
    if reuse:
        log_weights = cp.Parameter(n_entries)
        shared = cp.Problem(cp.Minimize(cp.sum(cp.exp(exponent @ u + log_weights))))

    u_all = np.full((problem.n, int(offsets[-1])), np.nan)
    iterations = torch.full((problem.n,), -1, dtype=torch.int64)
    status: list[str] = []
    for i in range(problem.n):
        if reuse and positive[i].all():
            log_weights.value = log_q[i]
            prob = shared
        else:
            keep = positive[i]
            prob = cp.Problem(cp.Minimize(cp.sum(cp.exp(exponent[keep] @ u + log_q[i, keep]))))
        outcome = _solve_once(prob, solver, options)
        if outcome not in SOLVED and retry:
            again = _solve_once(prob, solver, {**options, **CLARABEL_RETRY})
            outcome = again if again in SOLVED else f"{again} (retried; first: {outcome})"
        status.append(outcome)
        if u.value is not None and status[-1] in SOLVED:
            u_all[i] = u.value
        stats = prob.solver_stats
        if stats is not None and stats.num_iters is not None:
            iterations[i] = int(stats.num_iters)
    device = problem.device
    s2 = [
        torch.from_numpy(np.exp(2 * u_all[:, offsets[v] : offsets[v + 1]])).to(device)
        for v in range(len(problem.widths))
    ]
    residual = problem.balance(s2).to(device)
    solved = torch.tensor([s in SOLVED for s in status], device=device)
    converged = solved & (residual < tol)  # NaN (no solution) compares False
    return CvxpySolution(s2, iterations.to(device), status, residual, converged)
