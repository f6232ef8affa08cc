# Shared helpers: where outputs live, which shards an experiment has, and each rule's params and
# resources from the settings layer (SETTINGS, checked in the Snakefile).
#
# Params hold exactly what changes a rule's result: a setting's resolved value, as a plain dict
# in the settings' field order (so reordering config.yaml changes nothing). The environment
# (data_root, download, device) and resources (compute) are never params.

import dataclasses
import functools
import os
import re

import symbnn.analyses.plan
import symbnn.fingerprint
import symbnn.methods.registry
import symbnn.parameter_count
import symbnn.plateau
import symbnn.report.symmetry_counts
import symbnn.settings.workflow

RESULTS = SETTINGS.results
RUN = SETTINGS.run
EXPERIMENTS = SETTINGS.experiments
EXPERIMENT_NAME = symbnn.settings.workflow.EXPERIMENT_NAME


wildcard_constraints:
    experiment=EXPERIMENT_NAME,
    shard="[0-9]+",


def experiment_of(wildcards):
    return EXPERIMENTS[wildcards.experiment]


def training_params(wildcards):
    """What determines the trained weights: data, model and recipe; and the content of the
    datasets of the user's own, if any (a changed dataset reruns the trainings)."""
    experiment = experiment_of(wildcards)
    params = {
        "data": experiment.data.to_dict(),
        "model": experiment.model.to_dict(),
        "recipe": experiment.recipe.to_dict(),
    }
    return {**params, **data_fingerprint(wildcards.experiment)}


@functools.cache
def data_fingerprint(experiment):
    """{"fingerprint": hash of what the experiment's dataset loaders of the user's own
    return}, computed once per run in a child process; {} for shipped datasets."""
    data = EXPERIMENTS[experiment].data
    found = symbnn.fingerprint.of_data(data, SETTINGS.data_root)
    return {} if found is None else {"fingerprint": found}


def plateau_training_params(wildcards):
    """`training_params` with the recipe run for twice the epochs (the plateau check)."""
    params = training_params(wildcards)
    recipe = experiment_of(wildcards).recipe.stretched(symbnn.plateau.FACTOR)
    return {**params, "recipe": recipe.to_dict()}


def section_params(*path):
    """Params function: the experiment's settings section at `path` (e.g. "symmetry"), or one
    of its keys (e.g. "mmd", "pvalue")."""

    def params(wildcards):
        value = experiment_of(wildcards)
        for name in path:
            value = getattr(value, name)
        return value.to_dict() if hasattr(value, "to_dict") else value

    return params


def shard_ids(experiment):
    return EXPERIMENTS[experiment].posterior.shard_ids()


def compute(key):
    """Resource function: the experiment's `compute` setting `key`."""
    return lambda wildcards: getattr(experiment_of(wildcards).compute, key)


def partition_for(gpus):
    """config.yaml's Slurm partition for a job with this many GPUs."""
    return SETTINGS.slurm.gpu_partition if gpus > 0 else SETTINGS.slurm.cpu_partition


def train_partition(wildcards):
    return partition_for(experiment_of(wildcards).compute.gpus)


def cpus_per_gpu(wildcards):
    """The job's threads per GPU (the Slurm plugin's --cpus-per-gpu); 0 leaves CPU jobs to
    --cpus-per-task."""
    resources = experiment_of(wildcards).compute
    return max(1, resources.threads // resources.gpus) if resources.gpus else 0


# Models from this many parameters up (ResNet-18: 11M) get a GPU for their layer-wise MMD:
# the L1 distances of 1100 samples cost minutes per million weights on a CPU.
LARGE_MMD_PARAMETERS = 1_000_000


@functools.cache
def n_parameters(experiment):
    """Parameter count of an experiment's model (in a child process: planning imports no
    torch)."""
    return symbnn.parameter_count.in_child(EXPERIMENTS[experiment].model.to_dict())


def mmd_gpus(wildcards):
    """The experiment's GPUs for the MMD of a large model; small models stay on CPUs."""
    large = n_parameters(wildcards.experiment) >= LARGE_MMD_PARAMETERS
    return experiment_of(wildcards).compute.gpus if large else 0


def mmd_partition(wildcards):
    return partition_for(mmd_gpus(wildcards))


def mmd_mem_mb(wildcards):
    return 16000 if mmd_gpus(wildcards) else 4000


def store_runtime(base):
    """Minutes for a job that reads or writes every weight of the target posterior: `base`
    plus 2 min per GB (1000 ResNet-18s are 45 GB of float32)."""

    def runtime(wildcards):
        n_samples = experiment_of(wildcards).posterior.n_samples
        gigabytes = n_samples * n_parameters(wildcards.experiment) * 4 / 1e9
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
            f"{RESULTS}/{experiment}/report/collapse.png",
            f"{RESULTS}/{experiment}/report/symmetry_counts.md",
            # always on disk, so that the planning applies the acceptance rule to them (a
            # job whose checkpoint input is missing would not be checked at all)
            f"{RESULTS}/{experiment}/{TARGET}_accuracies.parquet",
        ]
        posterior = EXPERIMENTS[experiment].posterior
        if posterior.plateau_seeds is not None and posterior.source == "train":
            targets.append(f"{RESULTS}/{experiment}/report/plateau.md")
        if EXPERIMENTS[experiment].mmd.de_members is not None:
            targets.append(f"{RESULTS}/{experiment}/report/mmd_deep_ensembles.md")
        if method_variants(experiment):
            targets.append(f"{RESULTS}/{experiment}/report/table1.md")
            targets.append(f"{RESULTS}/{experiment}/{POOL}_accuracies.parquet")
    return targets


wildcard_constraints:
    method="|".join(
        symbnn.methods.registry.method_names(
            e.methods for e in EXPERIMENTS.values() if e.methods is not None
        )
    ),
    variant="single|multi",
    block="[0-9]+",


def methods_of(experiment):
    return EXPERIMENTS[experiment].methods


def pool_posterior(experiment):
    """The pool as a posterior section, so that it shards like the target posterior."""
    methods, posterior = methods_of(experiment), EXPERIMENTS[experiment].posterior
    return posterior.replace(
        n_samples=methods.pool,
        shard_size=min(methods.pool, posterior.shard_size),
        first_seed=methods.first_seed,
    )


def acceptance_params(wildcards):
    """The acceptance rule: which trained networks are kept."""
    posterior = experiment_of(wildcards).posterior
    return {
        "min_accuracy": posterior.min_accuracy,
        "max_below_median": posterior.max_below_median,
    }


# ---- which networks the acceptance rule keeps, decided while planning (symbnn.acceptance)
# A job that reads only the kept networks holds their store rows in its params and reads the
# convergence table as ancient(): an edit of the rule that keeps the same networks reruns the
# convergence tables alone. The store's accuracies come from the checkpoint `accuracies`, so
# that a freshly trained store is planned for once its accuracies exist.
TARGET, POOL = "posterior/target", "modes/pool"


def accuracies_input(store):
    """Input function: the accuracies of the experiment's `store` (TARGET or POOL)."""

    def table(wildcards):
        job = checkpoints.accuracies.get(experiment=wildcards.experiment, store=store)
        return job.output.table

    return table


def acceptance_of(wildcards, store):
    """The convergence table the acceptance rule gives the networks of `store`."""
    import symbnn.acceptance

    path = accuracies_input(store)(wildcards)
    posterior = experiment_of(wildcards).posterior
    return symbnn.acceptance.acceptance_table(
        read_accuracies(path, os.stat(path).st_mtime_ns),
        posterior.min_accuracy,
        posterior.max_below_median,
    )


@functools.cache
def read_accuracies(path, mtime):
    import polars

    return polars.read_parquet(path)


def kept_target_rows(wildcards):
    """Params function: the target networks the acceptance rule keeps (store rows)."""
    import symbnn.acceptance

    return symbnn.acceptance.kept_rows(acceptance_of(wildcards, TARGET))


def kept_mode_rows(wildcards, modes):
    """The pool rows of `modes` (mode k is the k-th kept pool network; None where the pool
    keeps too few, which the job reports)."""
    import symbnn.acceptance

    rows = symbnn.acceptance.kept_rows(acceptance_of(wildcards, POOL))
    return [rows[k] if k < len(rows) else None for k in modes]


def method_mode_rows(wildcards):
    """Params function: the pool rows of every mode a method's variants use."""
    return kept_mode_rows(wildcards, [k for block in mode_blocks(wildcards) for k in block])


def retry_threshold(wildcards):
    """The pool's acceptance threshold for a fit that retries seeds until its own network
    reaches it, as its params hold it: the threshold it last ran with while the new one would
    keep the same attempts (its fit file records each attempt's accuracy), so that such an
    edit refits nothing."""
    import symbnn.acceptance
    import symbnn.treefile

    threshold = float(acceptance_of(wildcards, POOL)["threshold"][0])
    path = f"{RESULTS}/{wildcards.experiment}/methods/{wildcards.method}/fits/{wildcards.block}.safetensors"
    try:
        fits = symbnn.treefile.outline(path)["fits"]
        recorded = {fit["threshold"] for fit in fits}
        attempts = [fit["attempts"] for fit in fits]
    except (FileNotFoundError, symbnn.treefile.TreeFileError, KeyError, TypeError):
        return threshold
    if len(recorded) != 1:
        return threshold
    return symbnn.acceptance.retry_threshold(threshold, recorded.pop(), attempts)


def fit_params(wildcards):
    """What one block of a method's fits depends on besides the pool: the method's fit
    settings, the modes and the pool rows they are, the seed; the sample counts when the
    method draws its samples while fitting; the retries and the threshold when it trains its
    own network."""
    methods = methods_of(wildcards.experiment)
    registry, method = symbnn.methods.registry, wildcards.method
    described = registry.descriptor(method, methods)
    blocks = mode_blocks(wildcards)
    params = {
        **registry.code_params(method, methods),
        "settings": registry.fit_settings(method, methods),
        "modes": blocks[int(wildcards.block)],
        "seed": methods.seed,
    }
    if described.samples_at_fit:
        params["counts"] = registry.fit_counts(method, methods)
    # the pool networks the modes are (an acceptance rule keeping them refits nothing)
    params["rows"] = kept_mode_rows(wildcards, params["modes"])
    if described.trains_from_scratch:
        # the network must pass the pool's acceptance threshold within these retries
        params["retries"] = methods.retries
        params["threshold"] = retry_threshold(wildcards)
    return params


def sample_params(wildcards):
    """What a variant's samples depend on besides its fits: every setting of the method but
    the prediction-only ones (the fits carry the others' effect), the sample counts and the
    seed."""
    methods = methods_of(wildcards.experiment)
    registry = symbnn.methods.registry
    return {
        **registry.code_params(wildcards.method, methods),
        "settings": registry.sample_settings(wildcards.method, methods),
        "plan": [
            dataclasses.asdict(d)
            for d in registry.sample_plan(wildcards.method, wildcards.variant, methods)
        ],
        "seed": methods.seed,
    }


def predict_inputs(wildcards):
    """The variant's samples; for a linearised predictive also the pool, whose networks are
    the modes the samples are linearised at."""
    path = f"{RESULTS}/{wildcards.experiment}/methods/{wildcards.method}/{wildcards.variant}"
    inputs = {"store": f"{path}/samples.zarr"}
    methods = methods_of(wildcards.experiment)
    if symbnn.methods.registry.predictive(wildcards.method, methods) == "linearised":
        inputs["pool"] = f"{RESULTS}/{wildcards.experiment}/modes/pool.zarr"
    return inputs


def mode_blocks(wildcards):
    """The modes of each fit job of the method: all in one block where it fits them in one
    batched run (`methods.fit_block` splits it), else one job per mode."""
    registry = symbnn.methods.registry
    batched = registry.batched_fits(experiment_of(wildcards))
    return registry.mode_blocks(wildcards.method, methods_of(wildcards.experiment), batched)


def fit_blocks(wildcards):
    return [f"{b:03d}" for b in range(len(mode_blocks(wildcards)))]


def method_variants(experiment):
    """(method, variant) pairs an experiment's `methods` section turns on."""
    methods = methods_of(experiment)
    if methods is None:
        return []
    registry = symbnn.methods.registry
    return [
        (m, v) for m in registry.configured_methods(methods) for v in registry.variants(m, methods)
    ]


def method_labels(wildcards):
    """Table 1's row label of each configured method, in row order."""
    return symbnn.methods.registry.labels(methods_of(wildcards.experiment))


def alignment_targets():
    """Barrier tables and plots for every experiment with two target networks or more, and
    for its pairs of VI posteriors where `alignment.variational` is set."""
    targets = []
    for experiment in RUN:
        settings = EXPERIMENTS[experiment]
        if settings.posterior.n_samples >= 2:
            targets += [
                f"{RESULTS}/{experiment}/report/alignment_barrier.md",
                f"{RESULTS}/{experiment}/report/alignment_interpolation.png",
            ]
        if settings.alignment.variational is not None:
            targets += [
                f"{RESULTS}/{experiment}/report/variational_barriers.md",
                f"{RESULTS}/{experiment}/report/variational_interpolation.png",
            ]
    return targets


def alignment_params(wildcards):
    """What the barriers along the paths depend on (the VI fits' settings reach the
    variational barriers through their fit files)."""
    settings = experiment_of(wildcards).alignment.to_dict()
    return {k: v for k, v in settings.items() if k != "variational"}


def variational_samples(wildcards):
    return experiment_of(wildcards).alignment.variational.samples


def variational_fit_params(wildcards):
    """What one VI fit depends on besides the experiment's data, model and recipe."""
    experiment = experiment_of(wildcards)
    variational = experiment.alignment.variational
    return {
        "bnn": variational.bnn.to_dict(),
        "min_accuracy": experiment.posterior.min_accuracy,
        "retries": variational.retries,
    }


def variational_fit_files(wildcards):
    variational = experiment_of(wildcards).alignment.variational
    return [
        f"{RESULTS}/{wildcards.experiment}/alignment/variational/{seed}.safetensors"
        for seed in variational.seeds()
    ]


def mode_count_inputs(wildcards):
    """The canonical target posterior and its convergence flags, where the symmetry-counts
    table measures the D.1 mode count (small models: every pair of units of every network is
    compared); none for the others."""
    if not symbnn.analyses.plan.has_small_model(SETTINGS, wildcards.experiment):
        return {}
    path = f"{RESULTS}/{wildcards.experiment}"
    return {
        "canonical": f"{path}/canonical/target.zarr",
        "converged": ancient(f"{path}/posterior/converged.parquet"),
        "accuracies": accuracies_input(TARGET)(wildcards),
    }


def mode_count_params(wildcards):
    """The kept target networks where the symmetry-counts table measures them."""
    if not symbnn.analyses.plan.has_small_model(SETTINGS, wildcards.experiment):
        return []
    return kept_target_rows(wildcards)


# The paper's further analyses (rules/analyses.smk).
ANALYSES = symbnn.analyses.plan.analyses_folder(SETTINGS)
# the files the default target asks for (an analysis set to false is skipped)
analyses_targets = functools.partial(symbnn.analyses.plan.targets, SETTINGS)


def analysis_params(name, figure=False):
    """Params of an analysis: its resolved settings (the rule runs only when it is on) but
    those only its figure reads (its section's FIGURE_KEYS), or with figure=True those only:
    the params of the rule drawing its figure."""
    section = getattr(SETTINGS.analyses, name)
    if section is False:
        return {}
    drawn = getattr(type(section), "FIGURE_KEYS", ())
    return {k: v for k, v in section.to_dict().items() if (k in drawn) == figure}


def permutation_frequency_resource(key):
    """Resource function: `key` of an experiment's permutation-frequency job (one core for a
    small model, the experiment's `compute` section for a ResNet-18)."""

    def resource(wildcards):
        resources = symbnn.analyses.plan.permutation_frequency_resources
        return resources(SETTINGS, wildcards.experiment)[key]

    return resource


# ---- released checkpoints (rules/checkpoints.smk): which experiments import, not train


def imported_experiments(pool=False):
    """Names of the experiments whose target (or pool) comes from released networks."""
    names = []
    for name, experiment in EXPERIMENTS.items():
        checkpoints = experiment.posterior.checkpoints
        if checkpoints is None:
            continue
        if pool and not (checkpoints.pool and experiment.methods is not None):
            continue
        names.append(name)
    return names


def names_pattern(names):
    """A wildcard pattern matching exactly `names` (nothing when there are none)."""
    return "|".join(re.escape(name) for name in names) or "(?!)"


def trained_pattern(pool=False):
    """A wildcard pattern for the experiments whose target (or pool) is trained: every name
    but the imported ones (each followed by '/' in the paths these rules write)."""
    imported = imported_experiments(pool)
    if not imported:
        return EXPERIMENT_NAME
    return f"(?!(?:{names_pattern(imported)})/){EXPERIMENT_NAME}"


def checkpoint_source(wildcards):
    """The released files, as an input so that a changed bundle reruns the import; none when
    they are downloaded by the job."""
    checkpoints = experiment_of(wildcards).posterior.checkpoints
    return [] if checkpoints.download else [checkpoints.path]


def import_params(pool):
    """What an imported store depends on: the release, its range, the test split measured."""

    def params(wildcards):
        experiment = experiment_of(wildcards)
        count = experiment.posterior.n_samples
        offset = 0
        if pool:
            offset, count = count, experiment.methods.pool
        return {
            "checkpoints": experiment.posterior.checkpoints.to_dict(),
            "offset": offset,
            "count": count,
            "data": experiment.data.to_dict(),
            **data_fingerprint(wildcards.experiment),
        }

    return params
