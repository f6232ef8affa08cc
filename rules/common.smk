# The glue between the rules and the planning library (src/symbnn/plan, tested without
# Snakemake): which jobs an experiment has (symbnn.plan.jobs), their params
# (symbnn.plan.params), resources (symbnn.plan.resources) and the networks the acceptance rule
# keeps (symbnn.plan.kept). Rules read the settings layer's SETTINGS (checked in the
# Snakefile), never `config`; each function here passes a job's wildcards, and the output of
# the `accuracies` checkpoint, to the library as plain values.

import functools

import symbnn.analyses.plan
import symbnn.plan.jobs
import symbnn.plan.kept
import symbnn.plan.measured
import symbnn.plan.params
import symbnn.plan.paths
import symbnn.plan.resources
import symbnn.report.symmetry_counts
import symbnn.settings.workflow

RESULTS = SETTINGS.results
RUN = SETTINGS.run
EXPERIMENT_NAME = symbnn.settings.workflow.EXPERIMENT_NAME
# the stores of trained networks whose accuracies the `accuracies` checkpoint reads
TARGET, POOL = symbnn.plan.paths.TARGET, symbnn.plan.paths.POOL


wildcard_constraints:
    experiment=EXPERIMENT_NAME,
    shard="[0-9]+",
    method=symbnn.plan.jobs.method_pattern(SETTINGS),
    variant="single|multi",
    block="[0-9]+",


def job(function, *names, accuracies=None, **fixed):
    """A function of a job's wildcards (Snakemake's input, params and resource functions)
    returning `function(SETTINGS, experiment, <the wildcards `names`>, **fixed)`; with
    `accuracies` (TARGET or POOL), also a function returning the path of that store's
    accuracies table, which asks the checkpoint only when `function` calls it."""

    def of_wildcards(wildcards):
        values = [getattr(wildcards, name) for name in names]
        if accuracies is not None:
            values.append(lambda: accuracies_input(accuracies)(wildcards))
        return function(SETTINGS, wildcards.experiment, *values, **fixed)

    return of_wildcards


def accuracies_input(store):
    """Input function: the accuracies of the experiment's `store` (TARGET or POOL), the
    output of the checkpoint: jobs planned on a store still to be trained are planned again
    once it is."""

    def table(wildcards):
        job = checkpoints.accuracies.get(experiment=wildcards.experiment, store=store)
        return job.output.table

    return table


plan = symbnn.plan
# the targets of rule all, the shards, methods and fit blocks of an experiment
all_targets = functools.partial(plan.jobs.all_targets, SETTINGS)
alignment_targets = functools.partial(plan.jobs.alignment_targets, SETTINGS)
method_variants = functools.partial(plan.jobs.method_variants, SETTINGS)
method_labels = job(plan.jobs.method_labels)
imported_experiments = functools.partial(plan.jobs.imported_experiments, SETTINGS)
names_pattern = plan.jobs.names_pattern
trained_pattern = functools.partial(plan.jobs.trained_pattern, SETTINGS)
# input functions
target_shards = job(plan.jobs.target_shards)
pool_shards = job(plan.jobs.pool_shards)
fit_files = job(plan.jobs.fit_files, "method")
variant_files = lambda template: job(plan.jobs.variant_files, template=template)
checkpoint_source = job(plan.paths.checkpoint_source)
predict_inputs = job(plan.paths.predict_inputs, "method", "variant")
variational_fit_files = job(plan.paths.variational_fit_files)
# params
target_shard_seeds = job(plan.params.target_shard_seeds, "shard")
pool_shard_seeds = job(plan.params.pool_shard_seeds, "shard")
plateau_seeds = job(plan.params.plateau_seeds)
predictive = job(plan.params.predictive, "method")
training_params = job(plan.params.training_params)
plateau_training_params = job(plan.params.plateau_training_params)
acceptance_params = job(plan.params.acceptance_params)
fit_params = job(plan.params.fit_params, "method", "block", accuracies=POOL)
sample_params = job(plan.params.sample_params, "method", "variant")
alignment_params = job(plan.params.alignment_params)
variational_samples = job(plan.params.variational_samples)
variational_fit_params = job(plan.params.variational_fit_params)
kept_target_rows = job(plan.kept.kept_target_rows, accuracies=TARGET)
method_mode_rows = job(plan.kept.method_mode_rows, "method", accuracies=POOL)
mode_count_params = job(plan.kept.mode_count_params, accuracies=TARGET)
analysis_params = functools.partial(plan.params.analysis_params, SETTINGS)
# resources (never params: they change no result)
compute = lambda key: job(plan.resources.compute, key=key)
store_runtime = lambda base: job(plan.resources.store_runtime, base=base)
train_partition = job(plan.resources.train_partition)
cpus_per_gpu = job(plan.resources.cpus_per_gpu)
mmd_gpus = job(plan.resources.mmd_gpus)
mmd_partition = job(plan.resources.mmd_partition)
mmd_mem_mb = job(plan.resources.mmd_mem_mb)
permutation_frequency_resource = lambda key: job(
    plan.resources.permutation_frequency_resource, key=key
)
n_parameters = functools.partial(plan.measured.n_parameters, SETTINGS)


def section_params(*path):
    """Params function: the experiment's settings section at `path` (e.g. "symmetry"), or one
    of its keys (e.g. "mmd", "pvalue")."""
    return lambda wildcards: plan.params.section_params(SETTINGS, wildcards.experiment, *path)


def mode_count_inputs(wildcards):
    """The canonical target posterior, its convergence flags (ancient: the kept rows are in
    the params) and accuracies where the symmetry-counts table measures the mode count."""
    inputs = plan.paths.mode_count_inputs(SETTINGS, wildcards.experiment)
    if not inputs:
        return {}
    inputs["converged"] = ancient(inputs["converged"])
    return {**inputs, "accuracies": accuracies_input(TARGET)(wildcards)}


def import_params(pool):
    return job(plan.params.import_params, pool=pool)


# The paper's further analyses (rules/analyses.smk).
ANALYSES = symbnn.analyses.plan.analyses_folder(SETTINGS)
# the files the default target asks for (an analysis set to false is skipped)
analyses_targets = functools.partial(symbnn.analyses.plan.targets, SETTINGS)
