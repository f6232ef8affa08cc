"""Rule fit: one block of modes of a method, fitted; the fits saved for drawing.
Everything that shapes the fit comes from params (the rerun trigger): among them the pool
rows of the modes and, for a method that trains its own network, the acceptance threshold;
a sampling-only setting the params leave out takes its default, which the fit does not
read."""

import torch

from symbnn.jobenv import environment, job_experiment
from symbnn.methods.registry import descriptor
from symbnn.methods.sampling import fit_block, job_problem, save_fits
from symbnn.runlog import log_to
from symbnn.store import StoreError

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    env = environment(snakemake)
    method, training, fit = (
        snakemake.wildcards.method,
        snakemake.params.training,
        snakemake.params.fit,
    )
    described = descriptor(method, job_experiment(snakemake).methods)
    # a method that trains its own network keeps it only if it passes the pool's acceptance
    # threshold, as the pool's networks had to
    problem = job_problem(training, env, fit.get("threshold", 0.0), fit.get("retries", 0))
    rows = dict(zip(fit["modes"], fit["rows"], strict=True))
    if None in rows.values():
        missing = [mode for mode, row in rows.items() if row is None]
        raise StoreError(
            f"{snakemake.input.pool}: the acceptance rule keeps too few pool networks for "
            f"mode(s) {missing}; raise methods.pool (or lower methods.modes / n_samples for Deep "
            "Ensembles)"
        )
    fits = fit_block(
        problem,
        described,
        described.settings.parse(fit["settings"], f"methods.{method}"),
        fit["modes"],
        fit["seed"],
        fit.get("counts"),
        snakemake.input.pool,
        # mode k is the pool's k-th kept network: only this block's are looked up
        [rows.get(k) for k in range(max(rows) + 1)],
    )
    save_fits(fits, snakemake.output.fits)
    print(f"fitted {method} at modes {fits.modes} (pool seeds {fits.mode_seeds})")
