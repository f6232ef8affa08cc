"""The minimum scaled network mass (min-mass) of networks and of whole weight stores.

``min_mass`` solves docs/maths.md, section 3 for one network or a stack of networks, with the fast
solver (exact block coordinate descent, batched, CPU or GPU) or the cvxpy reference. What
counts as mass and which scales are variables is defined in `symbnn.symmetry.mass`: weights
of conv/linear layers and BatchNorm gammas, biases and betas excluded; conv outputs feeding
BatchNorm are not variables.

Both solvers report the balance residual max |log(incoming / outgoing mass)| over units (zero
at the optimum) and ``solver_converged``: the residual is below ``tol`` (the fast solver's
stopping rule, default 1e-9; for cvxpy an acceptance threshold, default 1e-3, on top of a
solved status). It says whether the min-mass problem was solved, not whether the network's
training converged.

Structures that slice tensors (`Symmetry.is_plain` false) are solved on their plain view
(`Symmetry.plain`): the state is split, solved and the min-mass state joined back.

Degenerate samples (a unit with all-zero incoming or outgoing weights: the minimum is not
attained) raise ValueError by default; ``on_degenerate="flag"`` solves the other samples and
reports the degenerate ones with NaN scales and masses, ``solver_converged=False``,
``degenerate=True`` and their weights unchanged. NaN or infinite weights always raise.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from symbnn.settings import SymmetryRemoval
from symbnn.symmetry import Symmetry, apply_scales, check_finite, unit_groups
from symbnn.symmetry.mass import MassProblem, mass_problem
from symbnn.symmetry.minmass_fast import MAX_SWEEPS, solve_fast
from symbnn.symmetry.operators import as_stack, unstack
from symbnn.threads import torch_threads_for

LOG = logging.getLogger(__name__)

SOLVERS = ("fast", "cvxpy")
# The status of every sample of a network without scaling symmetries.
NOTHING_TO_RESCALE = "nothing to rescale: the architecture has no scaling symmetry"


@dataclass
class MinMassResult:
    mass_before: torch.Tensor  # (n,) float64
    mass_after: torch.Tensor  # (n,) float64, NaN for degenerate samples
    scales: dict[str, torch.Tensor]  # variable scale group -> (n, width) optimal s
    iterations: torch.Tensor  # (n,) sweeps (fast) or solver iterations (cvxpy)
    solver_converged: torch.Tensor  # (n,) bool: residual < tol (cvxpy: and a solved status)
    residual: torch.Tensor  # (n,) max |log(incoming / outgoing mass)| at the solution
    degenerate: torch.Tensor  # (n,) bool
    state: dict[str, torch.Tensor] | None  # the min-mass networks (input dtype), if asked for
    status: list[str] | None = None  # cvxpy status per sample (any solver: NOTHING_TO_RESCALE)


def _describe_degenerate(problem: MassProblem, sample_offset: int) -> str:
    parts = []
    for name, side, zero in problem.degenerate_units():
        samples, units = zero.nonzero(as_tuple=True)
        parts.append(
            f"{name}: unit(s) {sorted(set(units.tolist()))[:10]} of sample(s) "
            f"{sorted(set((samples + sample_offset).tolist()))[:10]} have no {side} weights"
        )
    return "; ".join(parts)


def _solve(
    problem: MassProblem, solver: str, tol: float | None, max_sweeps: int, solver_options: dict
):
    if not problem.widths:
        # No scaling symmetry (SiLU, GELU, normalised inputs...): every network is its own
        # min-mass network, whichever solver was asked for.
        n = problem.n
        zeros = torch.zeros(n, dtype=torch.float64)
        done = torch.ones(n, dtype=torch.bool)
        return [], zeros.long(), done, zeros, [NOTHING_TO_RESCALE] * n
    # tol None: each solver's own default (its stopping rule or acceptance threshold)
    options = solver_options if tol is None else {**solver_options, "tol": tol}
    if solver == "fast":
        sol = solve_fast(problem, max_sweeps=max_sweeps, **options)
        return sol.s2, sol.iterations, sol.converged, sol.residual, None
    # local: keeps scipy out of importing symbnn.symmetry.minmass
    from symbnn.symmetry.minmass_cvxpy import solve_cvxpy

    sol = solve_cvxpy(problem, **options)
    return sol.s2, sol.iterations, sol.converged, sol.residual, sol.status


def min_mass(
    state: Mapping[str, torch.Tensor],
    sym: Symmetry | dict[str, Any],
    *,
    solver: str = SymmetryRemoval().solver,
    tol: float | None = None,
    max_sweeps: int = MAX_SWEEPS,
    device: str | torch.device | None = None,
    on_degenerate: str = "raise",
    return_state: bool = True,
    solver_options: dict | None = None,
    sample_offset: int = 0,
) -> MinMassResult:
    """Optimal scales of one network or a stack; the min-mass network computes the same function.

    ``tol``: the balance residual below which a sample counts as converged; None: the
    solver's own (fast: its stopping rule, `symbnn.symmetry.minmass_fast.TOLERANCE`; cvxpy:
    `symbnn.symmetry.minmass_cvxpy.TOLERANCE`). ``solver_options`` go to the solver:
    ``relaxation`` for "fast" (see `symbnn.symmetry.minmass_fast`), cvxpy's ``solver`` name
    and its settings for "cvxpy". ``sample_offset`` numbers the samples in error messages (a
    store block's first row)."""
    sym = unit_groups(sym) if isinstance(sym, dict) else sym
    with torch_threads_for(sum(state[t].numel() for t in sym.mass_tensors if t in state), device):
        view = sym.plain  # the identity for a plain structure
        result = _min_mass(
            view.split(state),
            view.sym,
            solver,
            tol,
            max_sweeps,
            device,
            on_degenerate,
            return_state,
            solver_options,
            sample_offset,
        )
    if result.state is not None:
        result.state = view.join(result.state)
    return result


def _min_mass(
    state,
    sym,
    solver,
    tol,
    max_sweeps,
    device,
    on_degenerate,
    return_state,
    solver_options,
    sample_offset,
):
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if on_degenerate not in ("raise", "flag"):
        raise ValueError(f"on_degenerate must be 'raise' or 'flag', got {on_degenerate!r}")
    stacked, single = as_stack(state, sym)
    check_finite(stacked, sym, sample_offset)
    problem = mass_problem(stacked, sym, device=device)
    n = problem.n
    dev = problem.device
    degenerate = problem.degenerate()
    if degenerate.any() and on_degenerate == "raise":
        raise ValueError(
            "degenerate min-mass problem (the minimum is not attained): "
            + _describe_degenerate(problem, sample_offset)
            + "; pass on_degenerate='flag' to skip such samples"
        )
    good = (~degenerate).nonzero().flatten()
    nan = float("nan")
    s2 = [torch.full((n, w), nan, dtype=torch.float64, device=dev) for w in problem.widths]
    iterations = torch.zeros(n, dtype=torch.int64, device=dev)
    solver_converged = torch.zeros(n, dtype=torch.bool, device=dev)
    residual = torch.full((n,), nan, dtype=torch.float64, device=dev)
    status: list[str] | None = ["degenerate"] * n if solver == "cvxpy" else None
    if good.numel():
        sub = problem if good.numel() == n else problem.subset(good)
        sub_s2, sub_it, sub_conv, sub_res, sub_status = _solve(
            sub, solver, tol, max_sweeps, solver_options or {}
        )
        for v in range(len(s2)):
            s2[v][good] = sub_s2[v]
        iterations[good] = sub_it.to(dev)
        solver_converged[good] = sub_conv.to(dev)
        residual[good] = sub_res.to(dev)
        if sub_status is not None:
            status = status or ["degenerate"] * n
            for i, st in zip(good.tolist(), sub_status):
                status[i] = st
    scales = {name: v.sqrt() for name, v in zip(problem.names, s2)}
    mass_after = problem.mass(s2)
    scaled = None
    if return_state:
        ones = {k: torch.where(torch.isnan(v), torch.ones_like(v), v) for k, v in scales.items()}
        scaled = unstack(apply_scales(stacked, sym, ones), single)
    result = MinMassResult(
        problem.mass(),
        mass_after,
        scales,
        iterations,
        solver_converged,
        residual,
        degenerate,
        scaled,
        status,
    )
    if single:
        result.mass_before, result.mass_after = result.mass_before[0], result.mass_after[0]
        result.scales = {k: v[0] for k, v in scales.items()}
        result.iterations, result.solver_converged = iterations[0], solver_converged[0]
        result.residual, result.degenerate = residual[0], degenerate[0]
    return result


def check_finite_table(table, store: str | os.PathLike) -> None:
    """ValueError naming the column (a mass tensor for the max_abs_* columns), the sample and
    the input store when a min-mass table holds NaN or an infinite value. A degenerate sample
    reported with ``--on-degenerate flag`` may hold NaN after the solve, but its masses before
    must be finite."""
    import numpy as np
    import polars as pl

    degenerate = (
        table["degenerate"].to_numpy() if "degenerate" in table.columns else np.zeros(table.height)
    ).astype(bool)
    for name, dtype in table.schema.items():
        if dtype not in (pl.Float32, pl.Float64):
            continue
        values = table[name].to_numpy()  # null: NaN
        bad = ~np.isfinite(values)
        if not (name == "mass_before" or name.startswith("max_abs_before.")):
            bad &= ~(degenerate & np.isnan(values))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            sample = table["sample"][row] if "sample" in table.columns else row
            raise ValueError(
                f"{store}: min-mass of sample {sample}: {name} is {table[name][row]} (not "
                "finite); no table written. Check the store with `symbnn store validate`: "
                "weights this large make the mass overflow"
            )


def minmass_table(
    in_path: str | os.PathLike,
    solver: str = SymmetryRemoval().solver,
    *,
    tol: float | None = None,
    device: str | None = None,
    on_degenerate: str = "raise",
    block_bytes: int | None = None,
    sym: Symmetry | None = None,
):
    """One row per sample of a store: masses, iterations, the solver's convergence
    (``solver_converged``) and balance ``residual``, log-scale statistics (natural log, over
    every optimal scale of the sample) and each mass tensor's largest absolute weight before
    and after scaling (paper Figure 2). ``sym``: the store's symmetry structure (default: the
    one of its ``architecture`` attribute). Returns a polars DataFrame; a value that is not
    finite (beyond a flagged degenerate sample's NaNs) is a ValueError naming it."""
    import polars as pl

    # local: keeps zarr out of importing symbnn.symmetry.minmass
    from symbnn.store import open_store

    # local: keeps zarr out of importing symbnn.symmetry.minmass
    from symbnn.symmetry.store_blocks import DEFAULT_BLOCK_BYTES, iter_state_blocks

    store = open_store(in_path)
    sym = unit_groups(store.architecture) if sym is None else sym
    columns: dict[str, list] = {}

    def add(name, values):
        columns.setdefault(name, []).extend(values)

    for rows, state in iter_state_blocks(store, block_bytes or DEFAULT_BLOCK_BYTES):
        res = min_mass(
            state,
            sym,
            solver=solver,
            tol=tol,
            device=device,
            on_degenerate=on_degenerate,
            sample_offset=rows.start,
        )
        k = res.mass_before.shape[0]
        add("sample", list(range(rows.start, rows.start + k)))
        if "seed" in store.info_names:
            add("seed", store.info("seed", rows).tolist())
        add("solver", [solver] * k)
        add("mass_before", res.mass_before.tolist())
        add("mass_after", res.mass_after.tolist())
        add("iterations", res.iterations.tolist())
        add("solver_converged", res.solver_converged.tolist())
        add("degenerate", res.degenerate.tolist())
        add("residual", res.residual.tolist())
        add("scaling_dof", [sum(v.shape[-1] for v in res.scales.values())] * k)
        # no scale at all (no scaling symmetry): every scale is 1, its log 0
        if res.scales:
            log_s = torch.cat([v.log() for v in res.scales.values()], dim=1)
        else:
            log_s = torch.zeros(k, 1, dtype=torch.float64)
        add("log_scale_min", log_s.amin(dim=1).tolist())
        add("log_scale_median", log_s.median(dim=1).values.tolist())
        add("log_scale_max", log_s.amax(dim=1).tolist())
        for name in sym.mass_tensors:
            before = state[name].reshape(k, -1).abs().amax(dim=1).double()
            after = res.state[name].reshape(k, -1).abs().amax(dim=1).double()
            after = torch.where(
                res.degenerate.cpu(), torch.full_like(after, float("nan")), after.cpu()
            )
            add(f"max_abs_before.{name}", before.tolist())
            add(f"max_abs_after.{name}", after.tolist())
    table = pl.DataFrame(columns)
    check_finite_table(table, in_path)
    if not sym.scale_groups:
        LOG.warning("%s: %s; masses after equal masses before", in_path, NOTHING_TO_RESCALE)
    return table
