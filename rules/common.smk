# Shared helpers: where outputs live, which shards an experiment has, resources from config.

import symbnn.config

RESULTS = config.get("results", "results")
RUN = config["run"]
EXPERIMENTS = config["experiments"]


wildcard_constraints:
    experiment="[A-Za-z0-9][A-Za-z0-9-]*",
    shard="[0-9]+",


def experiment_config(wildcards):
    return EXPERIMENTS[wildcards.experiment]


def shard_ids(experiment):
    return symbnn.config.shard_ids(EXPERIMENTS[experiment]["posterior"])


def compute(wildcards, key, default):
    return EXPERIMENTS[wildcards.experiment].get("compute", {}).get(key, default)


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
        ]
    return targets
