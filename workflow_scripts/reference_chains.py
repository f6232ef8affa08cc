"""Rule reference_chains: the experiment's full-batch HMC chains, written as reference/hmc.zarr
(symbnn.reference.chains). Everything that shapes them comes from params: data, model,
recipe, the reference settings and the pool rows of the starting modes."""

import torch

from symbnn.jobenv import environment
from symbnn.methods.sampling import job_problem
from symbnn.reference.chains import run_reference, write_reference_store
from symbnn.runlog import log_to
from symbnn.settings import Data, Reference

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    training = snakemake.params.training
    reference = Reference.parse(snakemake.params.reference, "reference")
    problem = job_problem(training, environment(snakemake))
    pool = snakemake.input.get("pool")
    chains, mode_seeds = run_reference(problem, reference, pool, snakemake.params.rows)
    store = write_reference_store(
        snakemake.output.store,
        snakemake.wildcards.experiment,
        problem,
        Data.parse(training["data"], "data"),
        reference,
        chains,
        mode_seeds,
    )
    print(f"wrote {store} ({chains.evaluations} full-batch gradients per chain)")
