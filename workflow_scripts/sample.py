"""Rule sample: a method's variant, its samples drawn from every block's fits, as a store."""

import torch

from symbnn.jobenv import environment, job_experiment
from symbnn.methods.registry import Draw, descriptor
from symbnn.methods.sampling import (
    load_fits,
    problem_for,
    sample_attrs,
    sample_variant,
    write_sample_store,
)
from symbnn.runlog import log_to
from symbnn.settings import Data, Recipe

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    env = environment(snakemake)
    method, variant = snakemake.wildcards.method, snakemake.wildcards.variant
    training, sample = snakemake.params.training, snakemake.params.sample
    data = Data.parse(training["data"], "data")
    problem = problem_for(
        data,
        training["model"],
        Recipe.parse(training["recipe"], "recipe"),
        env.data_root,
        env.download,
        env.device,
    )
    described = descriptor(method, job_experiment(snakemake).methods)
    settings = described.settings.parse(sample["settings"], f"methods.{method}")
    blocks = [load_fits(path) for path in snakemake.input.fits]
    plan = [Draw(**d) for d in sample["plan"]]
    state, info = sample_variant(
        problem, described, settings, blocks, plan, sample["seed"], multi=variant == "multi"
    )
    attrs = sample_attrs(snakemake.wildcards.experiment, problem, data, method, variant, settings)
    store = write_sample_store(snakemake.output.store, attrs, state, info)
    print(f"wrote {store}")
