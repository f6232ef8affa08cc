"""Fast min-mass solver: exact block coordinate descent (docs/maths.md, section 3), batched over samples.

With every other variable fixed, unit i of variable v contributes s_i^2 A_i + B_i / s_i^2, whose
exact minimiser is s_i^2 = sqrt(B_i / A_i). Units of one variable never share a term, so a whole
scale group updates at once; so do variables that share no term, so a sweep updates the
variables in two colour classes ("red-black": 1st, 3rd, ... then 2nd, 4th, ... in the
structure's order; on a chain that halves the work of a forward-backward sweep).

``relaxation`` (omega) over-relaxes the step of variables that share terms with others:
s^2 <- s*^2 (1 + (omega - 1)(s*^2 / s^2 - 1)), which matches log-scale over-relaxation
(log s <- log s + omega (log s* - log s)) to first order and needs no power or logarithm. The
unit's objective is 2 sqrt(A B) cosh(2 d) in its log-scale distance d to s*, symmetric about s*,
and for omega in [1, 2) the relaxed point lies beyond s* but closer to it in log-scale than the
old scale was, so every update still lowers the mass (omega < 1 could make it negative and is
refused); omega = 1 is exact block coordinate descent. The default
1.2 halves the sweeps on OptuNet and deep MLPs (31 -> 16 on OptuNet, 18 -> 15 on the
784-256-256-10 MLP). Variables without such neighbours (all of a ResNet's, the single hidden
layer of a 2-layer MLP) always take the exact step.

Stopping is on the balance residual max |log(A_i s_i^2 / (B_i / s_i^2))| (the log-scale
gradient, relative), not on the change in mass: a mass criterion stops early on deep chains
with scales still off by 1e-4. A sweep whose steps all moved log s^2 by
less than tol / 2 is confirmed with the true residual (later updates move earlier units'
balance) before the sample stops.

Two back ends compute the same iterations:
- "numba" (the CPU default): one compiled loop per sample, samples in parallel. A store of
  small networks (OptuNet: 15 scales, 80 coupled weights) otherwise spends its time in the
  overhead of hundreds of tiny tensor operations per solve; here each sample also stops at
  its own sweep count instead of the batch's slowest.
- "torch" (GPU, or on request): whole scale groups as tensor operations with the sample axis
  last, (rows, cols, n), so that the element-wise work of a batch runs along contiguous
  memory (batched BLAS on thousands of 10x3 matrices is several times slower).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
import torch

from symbnn.symmetry.mass import MassProblem
from symbnn.threads import numba_threads_for

BACKENDS = ("auto", "numba", "torch")


# stop when max |log(incoming / outgoing mass)| is below this, or after this many sweeps
TOLERANCE = 1e-9
MAX_SWEEPS = 10_000


@dataclass
class FastSolution:
    s2: list[torch.Tensor]  # squared optimal scales, one (n, width) per variable
    iterations: torch.Tensor  # (n,) sweeps until the sample's residual fell below tol
    residual: torch.Tensor  # (n,) final balance residual
    converged: torch.Tensor  # (n,) residual < tol


def _colour_order(problem: MassProblem) -> list[int]:
    """Variables in an order where each colour class shares no term (greedy colouring in
    structure order; on a chain: even positions, then odd)."""
    n_vars = len(problem.names)
    neighbours = [set() for _ in range(n_vars)]
    for t in problem.terms:
        if t.out_var is not None and t.in_var is not None:
            neighbours[t.out_var].add(t.in_var)
            neighbours[t.in_var].add(t.out_var)
    colour: list[int] = []
    for v in range(n_vars):
        used = {colour[w] for w in neighbours[v] if w < v}
        colour.append(min(c for c in range(n_vars + 1) if c not in used))
    return sorted(range(n_vars), key=lambda v: (colour[v], v))


def _coupled(problem: MassProblem) -> list[bool]:
    """Variables that share a term with another variable (the only ones over-relaxed)."""
    flags = [False] * len(problem.names)
    for t in problem.terms:
        if t.out_var is not None and t.in_var is not None:
            flags[t.out_var] = flags[t.in_var] = True
    return flags


DEFAULT_RELAXATION = 1.2


def solve_fast(
    problem: MassProblem,
    tol: float = TOLERANCE,
    max_sweeps: int = MAX_SWEEPS,
    relaxation: float = DEFAULT_RELAXATION,
    backend: str = "auto",
) -> FastSolution:
    if not 1 <= relaxation < 2:
        raise ValueError(f"relaxation must lie in [1, 2), got {relaxation}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "numba" and not problem.on_cpu:
        raise ValueError(f"backend 'numba' runs on the CPU; the problem is on {problem.device}")
    if backend == "torch" or (backend == "auto" and not problem.on_cpu):
        return _solve_torch(problem, tol, max_sweeps, relaxation)
    return _solve_numba(problem, tol, max_sweeps, relaxation)


# ---------------------------------------------------------------------------------------------
# numba back end
#
# Samples run in blocks of up to LANES, the lane axis innermost in the block's arrays, so that
# each update is a SIMD instruction for the whole block and the loop control (terms, units,
# entries) is paid once per block rather than once per sample. A block sweeps until all its
# lanes pass. Terms with a fixed far side only add constants to A or B: summed once.

LANES = 64
# Fast-math flags that keep every result correctly rounded (no reciprocal or reassociation
# tricks) but let LLVM fuse multiply-adds and use vector min/max: the lane loops vectorise.
_FAST = {"nnan", "ninf", "nsz", "contract"}


def _solve_numba(
    problem: MassProblem, tol: float, max_sweeps: int, relaxation: float
) -> FastSolution:
    f = problem.flat()
    n_vars = len(problem.widths)
    coupled_terms = np.flatnonzero((f.out_var >= 0) & (f.in_var >= 0))
    # Per variable, the coupled terms whose rows (out) or columns (in) it owns, CSR-style.
    out_ptr, out_idx = _csr(f.out_var[coupled_terms], coupled_terms, n_vars)
    in_ptr, in_idx = _csr(f.in_var[coupled_terms], coupled_terms, n_vars)
    relax = np.asarray([c and relaxation != 1.0 for c in _coupled(problem)])
    lanes = min(LANES, problem.n)
    # About 30 sweeps over the coupled weights and the units of every sample: below a few
    # million updates one thread beats waking a team (a store of 1000 OptuNets: 3 million).
    work = (
        30
        * problem.n
        * (int(sum(f.rows[coupled_terms] * f.cols[coupled_terms])) + int(f.var_offset[-1]))
    )
    with numba_threads_for(work):
        s2, sweeps, residual = _bcd_cpu(
            f.q,
            f.out_var,
            f.in_var,
            f.rows,
            f.cols,
            f.offset,
            f.var_offset,
            coupled_terms,
            out_ptr,
            out_idx,
            in_ptr,
            in_idx,
            np.asarray(_colour_order(problem), dtype=np.int64),
            relax,
            float(tol),
            int(max_sweeps),
            float(relaxation),
            lanes,
        )
    s2 = torch.from_numpy(s2)
    off = f.var_offset
    residual = torch.from_numpy(residual)
    return FastSolution(
        [s2[:, off[v] : off[v + 1]] for v in range(n_vars)],
        torch.from_numpy(sweeps),
        residual,
        residual < tol,
    )


def _csr(owner: np.ndarray, items: np.ndarray, n_vars: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(owner, kind="stable")
    ptr = np.searchsorted(owner[order], np.arange(n_vars + 1)).astype(np.int64)
    return ptr, items[order].astype(np.int64)


@numba.njit(cache=True)
def _fixed_sides(q, out_var, in_var, rows, cols, offset, var_offset):
    """(n, units) constant parts of A and B: the terms whose other side is fixed at 1."""
    n = q.shape[0]
    units = var_offset[-1]
    a = np.zeros((n, units))
    b = np.zeros((n, units))
    for r in range(n):
        for t in range(out_var.shape[0]):
            o, i = out_var[t], in_var[t]
            if (o >= 0) == (i >= 0):
                continue
            for k in range(rows[t]):
                base = offset[t] + k * cols[t]
                for j in range(cols[t]):
                    if o >= 0:
                        a[r, var_offset[o] + k] += q[r, base + j]
                    else:
                        b[r, var_offset[i] + j] += q[r, base + j]
    return a, b


@numba.njit(cache=True, inline="always", error_model="numpy", fastmath=_FAST)
def _sides(
    v,
    s2,
    inv,
    qb,
    af,
    bf,
    var_off,
    t_out,
    t_in,
    t_rows,
    t_cols,
    c_off,
    out_ptr,
    out_idx,
    in_ptr,
    in_idx,
    a,
    b,
    lanes,
):
    """Incoming (a) and outgoing (b) masses of variable v's units, one block, current scales."""
    o, w = var_off[v], var_off[v + 1] - var_off[v]
    for i in range(w):
        for lane in range(lanes):
            a[i, lane] = af[o + i, lane]
            b[i, lane] = bf[o + i, lane]
    for p in range(out_ptr[v], out_ptr[v + 1]):  # coupled terms whose rows v scales
        t = out_idx[p]
        cols, e, c0 = t_cols[t], c_off[t], var_off[t_in[t]]
        for i in range(w):
            base = e + i * cols
            for j in range(cols):
                for lane in range(lanes):
                    a[i, lane] += qb[base + j, lane] * inv[c0 + j, lane]
    for p in range(in_ptr[v], in_ptr[v + 1]):  # coupled terms whose columns v divides
        t = in_idx[p]
        rows, e, r0 = t_rows[t], c_off[t], var_off[t_out[t]]
        for k in range(rows):
            base = e + k * w
            for i in range(w):
                for lane in range(lanes):
                    b[i, lane] += qb[base + i, lane] * s2[r0 + k, lane]


@numba.njit(parallel=True, cache=True, error_model="numpy", fastmath=_FAST)
def _bcd_cpu(
    q,
    t_out,
    t_in,
    t_rows,
    t_cols,
    t_offset,
    var_off,
    coupled_terms,
    out_ptr,
    out_idx,
    in_ptr,
    in_idx,
    order,
    relax,
    tol,
    max_sweeps,
    omega,
    lanes,
):
    n = q.shape[0]
    n_vars = var_off.shape[0] - 1
    units = var_off[-1]
    wmax = 1
    for v in range(n_vars):
        wmax = max(wmax, var_off[v + 1] - var_off[v])
    a_fixed, b_fixed = _fixed_sides(q, t_out, t_in, t_rows, t_cols, t_offset, var_off)
    # Coupled terms' entries, packed: c_off[t] is term t's first row in a block's qb.
    c_off = np.full(t_out.shape[0], -1, dtype=np.int64)
    n_coupled = 0
    for t in coupled_terms:
        c_off[t] = n_coupled
        n_coupled += t_rows[t] * t_cols[t]
    s2_out = np.empty((n, units))
    sweeps = np.zeros(n, dtype=np.int64)
    residual = np.zeros(n)
    step_hi, step_lo = math.exp(tol / 2), math.exp(-tol / 2)
    n_blocks = (n + lanes - 1) // lanes
    for blk in numba.prange(n_blocks):
        first = blk * lanes
        real = min(lanes, n - first)  # lanes past the end repeat the block's last sample
        qb = np.empty((n_coupled, lanes))
        af = np.empty((units, lanes))
        bf = np.empty((units, lanes))
        for lane in range(lanes):
            r = first + min(lane, real - 1)
            for t in coupled_terms:
                size = t_rows[t] * t_cols[t]
                for e in range(size):
                    qb[c_off[t] + e, lane] = q[r, t_offset[t] + e]
            for u in range(units):
                af[u, lane] = a_fixed[r, u]
                bf[u, lane] = b_fixed[r, u]
        s2 = np.ones((units, lanes))
        inv = np.ones((units, lanes))
        a = np.empty((wmax, lanes))
        b = np.empty((wmax, lanes))
        hi = np.empty(lanes)
        lo = np.empty(lanes)
        res = np.full(lanes, np.inf)
        done = np.zeros(lanes, dtype=np.int64)  # sweep at which each lane passed (0: not yet)
        sweep = 0
        while sweep < max_sweeps:
            sweep += 1
            hi[:] = 1.0  # extreme step factors s2_new / s2 this sweep
            lo[:] = 1.0
            for v in order:
                _sides(
                    v,
                    s2,
                    inv,
                    qb,
                    af,
                    bf,
                    var_off,
                    t_out,
                    t_in,
                    t_rows,
                    t_cols,
                    c_off,
                    out_ptr,
                    out_idx,
                    in_ptr,
                    in_idx,
                    a,
                    b,
                    lanes,
                )
                o = var_off[v]
                for i in range(var_off[v + 1] - o):
                    for lane in range(lanes):
                        new = math.sqrt(b[i, lane] / a[i, lane])
                        step = new * inv[o + i, lane]
                        hi[lane] = max(hi[lane], step)
                        lo[lane] = min(lo[lane], step)
                        s2[o + i, lane] = new
                    if relax[v]:  # see the module docstring
                        for lane in range(lanes):
                            s2[o + i, lane] *= 1.0 + (omega - 1.0) * (
                                s2[o + i, lane] * inv[o + i, lane] - 1.0
                            )
                    for lane in range(lanes):
                        inv[o + i, lane] = 1.0 / s2[o + i, lane]
            # Before its update a unit's |log(in/out)| was 2 |log step|.
            pending = False
            for lane in range(lanes):
                if done[lane] == 0 and hi[lane] < step_hi and lo[lane] > step_lo:
                    done[lane] = sweep
                pending = pending or done[lane] == 0
            if not pending or sweep == max_sweeps:
                # Later updates move earlier units' balance: confirm with the true residual.
                res[:] = 0.0
                for v in range(n_vars):
                    _sides(
                        v,
                        s2,
                        inv,
                        qb,
                        af,
                        bf,
                        var_off,
                        t_out,
                        t_in,
                        t_rows,
                        t_cols,
                        c_off,
                        out_ptr,
                        out_idx,
                        in_ptr,
                        in_idx,
                        a,
                        b,
                        lanes,
                    )
                    o = var_off[v]
                    for i in range(var_off[v + 1] - o):
                        for lane in range(lanes):
                            x = s2[o + i, lane]
                            res[lane] = max(
                                res[lane], abs(math.log(x * x * a[i, lane] / b[i, lane]))
                            )
                failed = False
                for lane in range(lanes):
                    if res[lane] >= tol:
                        done[lane] = 0
                        failed = True
                if not failed:
                    break
        for lane in range(real):
            for u in range(units):
                s2_out[first + lane, u] = s2[u, lane]
            residual[first + lane] = res[lane]
            sweeps[first + lane] = done[lane] if done[lane] > 0 else sweep
    return s2_out, sweeps, residual


# ---------------------------------------------------------------------------------------------
# torch back end


def _solve_torch(
    problem: MassProblem, tol: float, max_sweeps: int, relaxation: float
) -> FastSolution:
    n, n_vars = problem.n, len(problem.names)
    device = problem.device
    # Terms with a fixed far side contribute constants: precompute them once.
    a_fixed: list[torch.Tensor | None] = [None] * n_vars
    b_fixed: list[torch.Tensor | None] = [None] * n_vars
    rows_of: list[list] = [[] for _ in range(n_vars)]
    cols_of: list[list] = [[] for _ in range(n_vars)]

    def add(total, part):
        return part if total is None else total + part

    for t in problem.terms:
        q = t.q.permute(1, 2, 0)  # (rows, cols, n)
        if t.out_var is not None:
            if t.in_var is None:
                a_fixed[t.out_var] = add(a_fixed[t.out_var], q.sum(1))
            else:
                rows_of[t.out_var].append((q.contiguous(), t.in_var))
        if t.in_var is not None:
            if t.out_var is None:
                b_fixed[t.in_var] = add(b_fixed[t.in_var], q.sum(0))
            else:
                cols_of[t.in_var].append((q.contiguous(), t.out_var))

    s2 = [torch.ones(w, n, dtype=torch.float64, device=device) for w in problem.widths]
    inv = [torch.ones(w, n, dtype=torch.float64, device=device) for w in problem.widths]
    order = _colour_order(problem)
    coupled = [c and relaxation != 1.0 for c in _coupled(problem)]
    iterations = torch.full((n,), -1, dtype=torch.int64, device=device)
    step_hi, step_lo = math.exp(tol / 2), math.exp(-tol / 2)
    sweep = 0
    residual = None
    while sweep < max_sweeps:
        sweep += 1
        steps = []
        for v in order:
            a = a_fixed[v]
            for q, w in rows_of[v]:
                a = add(a, (q * inv[w].unsqueeze(0)).sum(1))
            b = b_fixed[v]
            for q, w in cols_of[v]:
                b = add(b, (q * s2[w].unsqueeze(1)).sum(0))
            new = torch.sqrt(b / a)
            # Before the update |log(in/out)| = 2 |log(s2 / new)|: the residual this unit had.
            step = new * inv[v]
            steps.append(step)
            s2[v] = new * (1.0 + (relaxation - 1.0) * (step - 1.0)) if coupled[v] else new
            inv[v] = 1.0 / s2[v]
        # max |log(in/out)| = 2 max |log step| < tol, tested without logarithms.
        lo, hi = torch.aminmax(torch.cat(steps), dim=0)
        newly = (hi < step_hi) & (lo > step_lo) & (iterations < 0)
        iterations = torch.where(newly, torch.full_like(iterations, sweep), iterations)
        if bool((iterations >= 0).all()):
            # Confirm with the true residual (later updates move earlier units' balance).
            residual = problem.balance([s.T for s in s2])
            failed = residual >= tol
            if not bool(failed.any()):
                break
            iterations = torch.where(failed, torch.full_like(iterations, -1), iterations)
    s2_rows = [s.T.contiguous() for s in s2]
    if residual is None or sweep >= max_sweeps:
        residual = problem.balance(s2_rows)
    converged = residual < tol
    iterations = torch.where(iterations < 0, torch.full_like(iterations, sweep), iterations)
    return FastSolution(s2_rows, iterations, residual, converged)
