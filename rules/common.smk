# Shared helpers: where outputs live, which shards an experiment has, resources from config.

import functools

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
    return key_sorted(
        {
            "data": experiment["data"],
            "model": experiment["model"],
            "recipe": experiment["recipe"],
            "posterior": {"min_accuracy": experiment["posterior"].get("min_accuracy", 0.5)},
        }
    )


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


def partition_for(gpus):
    """config.yaml's Slurm partition for a job with this many GPUs."""
    slurm = config.get("slurm", {})
    return slurm.get("gpu_partition", "gpu") if gpus > 0 else slurm.get("cpu_partition", "cpu")


def train_partition(wildcards):
    return partition_for(compute(wildcards, "gpus", 0))


def cpus_per_gpu(wildcards):
    """The job's threads per GPU (the Slurm plugin's --cpus-per-gpu); 0 leaves CPU jobs to
    --cpus-per-task."""
    gpus = compute(wildcards, "gpus", 0)
    return max(1, compute(wildcards, "threads", 1) // gpus) if gpus else 0


# Models from this many parameters up (ResNet-18: 11M) get a GPU for their layer-wise MMD:
# the L1 distances of 1100 samples cost minutes per million weights on a CPU (FACTS.md).
LARGE_MMD_PARAMETERS = 1_000_000


@functools.cache
def n_parameters(experiment):
    """Parameter count of an experiment's model, built on the meta device (no memory)."""
    import torch
    from symbnn.models import build_model, count_parameters

    with torch.device("meta"):
        model = build_model(EXPERIMENTS[experiment]["model"])
    return count_parameters(model)


def mmd_gpus(wildcards):
    """The experiment's GPUs for the MMD of a large model; small models stay on CPUs."""
    return (
        compute(wildcards, "gpus", 0)
        if n_parameters(wildcards.experiment) >= LARGE_MMD_PARAMETERS
        else 0
    )


def mmd_partition(wildcards):
    return partition_for(mmd_gpus(wildcards))


def mmd_mem_mb(wildcards):
    return 16000 if mmd_gpus(wildcards) else 4000


def store_runtime(base):
    """Minutes for a job that reads or writes every weight of the target posterior: `base`
    plus 2 min per GB (1000 ResNet-18s are 45 GB of float32)."""

    def runtime(wildcards):
        posterior = EXPERIMENTS[wildcards.experiment]["posterior"]
        gigabytes = posterior["n_samples"] * n_parameters(wildcards.experiment) * 4 / 1e9
        return base + int(2 * gigabytes)

    return runtime


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
        targets.append(f"{RESULTS}/{experiment}/report/collapse.png")
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
    return key_sorted(
        {
            "settings": symbnn.methods.registry.settings_of(wildcards.method, methods),
            "shares": symbnn.methods.registry.mode_shares(
                wildcards.method, wildcards.variant, methods
            ),
            "seed": methods.get("seed", 0),
        }
    )


def sample_blocks(wildcards):
    methods = methods_of(wildcards.experiment)
    blocks = symbnn.methods.sampling.mode_blocks(wildcards.method, wildcards.variant, methods)
    return [f"{b:03d}" for b in range(len(blocks))]


def method_variants(experiment):
    """(method, variant) pairs an experiment's `methods` section turns on."""
    registry = symbnn.methods.registry
    return [
        (m, v)
        for m in registry.configured_methods(methods_of(experiment))
        for v in registry.variants(m)
    ]


# Alignment and symmetrised VI (rules/alignment.smk).
ALIGNMENT_DEFAULTS = {
    "points": 11,
    "splits": ["train", "test"],
    "bn_batches": 20,
    "max_sweeps": 100,
    "vi_samples": 32,
}


def alignment_options(*keys):
    """Params function: the experiment's alignment settings (defaults filled in), only `keys`, the
    ones the rule's script reads, so that editing another rule's setting does not rerun it."""

    def options(wildcards):
        settings = {**ALIGNMENT_DEFAULTS, **EXPERIMENTS[wildcards.experiment].get("alignment", {})}
        return key_sorted({key: settings[key] for key in keys})

    return options


def symmetrised_vi_settings(wildcards):
    return key_sorted(EXPERIMENTS[wildcards.experiment].get("symmetrised_vi", {}))


def alignment_targets():
    """Barrier table and plot for every experiment with two target networks or more; the
    toy-task VI outputs for experiments with a `symmetrised_vi` section."""
    targets = []
    for experiment in RUN:
        settings = EXPERIMENTS[experiment]
        if settings["posterior"]["n_samples"] >= 2:
            targets += [
                f"{RESULTS}/{experiment}/report/alignment_barrier.md",
                f"{RESULTS}/{experiment}/report/alignment_interpolation.png",
            ]
        if "symmetrised_vi" in settings:
            targets += [
                f"{RESULTS}/{experiment}/report/symmetrised_vi.md",
                f"{RESULTS}/{experiment}/report/variational_alignment.png",
            ]
    return targets
