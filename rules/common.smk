# Shared helpers: where outputs live, which shards an experiment has, resources from config.

import symbnn.config
import symbnn.methods.registry
import symbnn.methods.sampling

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
        if method_variants(experiment):
            targets.append(f"{RESULTS}/{experiment}/report/table1.md")
    return targets


wildcard_constraints:
    method="|".join(symbnn.methods.registry.METHOD_NAMES),
    variant="single|multi",
    block="[0-9]+",


def methods_of(experiment):
    return EXPERIMENTS[experiment].get("methods", {})


def pool_section(experiment):
    """The pool as a posterior-like section, so it shards like the target posterior."""
    methods = methods_of(experiment)
    return {
        "n_samples": methods["pool"],
        "shard_size": min(methods["pool"], EXPERIMENTS[experiment]["posterior"]["shard_size"]),
        "first_seed": methods.get("first_seed", 1_000_000),
    }


def method_params(wildcards):
    """What one method's samples depend on besides the pool: its settings and the counts."""
    methods = methods_of(wildcards.experiment)
    return key_sorted({
        "settings": symbnn.methods.registry.settings_of(wildcards.method, methods),
        "shares": symbnn.methods.registry.mode_shares(wildcards.method, wildcards.variant, methods),
        "seed": methods.get("seed", 0),
    })


def sample_blocks(wildcards):
    methods = methods_of(wildcards.experiment)
    blocks = symbnn.methods.sampling.mode_blocks(wildcards.method, wildcards.variant, methods)
    return [f"{b:03d}" for b in range(len(blocks))]


def method_variants(experiment):
    """(method, variant) pairs an experiment's `methods` section turns on."""
    registry = symbnn.methods.registry
    return [(m, v) for m in registry.configured_methods(methods_of(experiment)) for v in registry.variants(m)]
