# Shared helpers: where outputs live, which shards an experiment has, resources from config.

import symbnn.config

RESULTS = config.get("results", "results")
RUN = config["run"]
EXPERIMENTS = config["experiments"]


wildcard_constraints:
    experiment="[A-Za-z0-9][A-Za-z0-9-]*",
    shard="[0-9]+",


def training_config(wildcards):
    """What determines the trained weights: data, model, recipe and the convergence flag.
    Only these are rule params, so editing e.g. symmetry settings never retrains."""
    experiment = EXPERIMENTS[wildcards.experiment]
    return key_sorted({
        "data": experiment["data"],
        "model": experiment["model"],
        "recipe": experiment["recipe"],
        "posterior": {"min_accuracy": experiment["posterior"].get("min_accuracy", 0.5)},
    })


def key_sorted(value):
    """Snakemake compares params by their printed form: sort keys so that reordering
    config.yaml is not mistaken for a change."""
    if isinstance(value, dict):
        return {key: key_sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [key_sorted(item) for item in value]
    return value


def shard_ids(experiment):
    return symbnn.config.shard_ids(EXPERIMENTS[experiment]["posterior"])


def compute(wildcards, key, default):
    return EXPERIMENTS[wildcards.experiment].get("compute", {}).get(key, default)


def symmetry_setting(wildcards, key, default):
    return EXPERIMENTS[wildcards.experiment].get("symmetry", {}).get(key, default)


def train_partition(wildcards):
    slurm = config.get("slurm", {})
    if compute(wildcards, "gpus", 0) > 0:
        return slurm.get("gpu_partition", "gpu")
    return slurm.get("cpu_partition", "cpu")


def all_targets():
    targets = []
    for experiment in RUN:
        targets += [
            f"{RESULTS}/{experiment}/report/posterior_training.md",
            f"{RESULTS}/{experiment}/report/posterior_store.md",
            f"{RESULTS}/{experiment}/canonical/target.zarr",
            f"{RESULTS}/{experiment}/report/minmass.png",
            f"{RESULTS}/{experiment}/report/minmass_summary.md",
        ]
        if "mmd" in EXPERIMENTS[experiment]:
            targets.append(f"{RESULTS}/{experiment}/report/mmd_deep_ensembles.md")
    return targets
