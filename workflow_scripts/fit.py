"""Rule fit: one block of modes of a method, fitted; the fits saved for drawing.
Everything that shapes the fit comes from params (the rerun trigger); a sampling-only setting
the params leave out takes its default, which the fit does not read."""

import torch

from symbnn.jobenv import environment, job_experiment
from symbnn.methods.registry import descriptor
from symbnn.methods.sampling import fit_block, job_problem, save_fits
from symbnn.posterior import acceptance_threshold_of, converged_rows
from symbnn.runlog import log_to

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
    threshold = acceptance_threshold_of(snakemake.input.converged) if "retries" in fit else 0.0
    problem = job_problem(training, env, threshold, fit.get("retries", 0))
    fits = fit_block(
        problem,
        described,
        described.settings.parse(fit["settings"], f"methods.{method}"),
        fit["modes"],
        fit["seed"],
        fit.get("counts"),
        snakemake.input.pool,
        converged_rows(snakemake.input.converged),
    )
    save_fits(fits, snakemake.output.fits)
    print(f"fitted {method} at modes {fits.modes} (pool seeds {fits.mode_seeds})")
