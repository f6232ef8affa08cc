# A target posterior (and, where asked, the methods' pool) imported from the authors' released
# networks instead of trained: experiments with `posterior: {source: checkpoints}`. The import
# rules match only those experiments, and gathering trained shards (rules/posterior.smk,
# rules/methods.smk) only the others (`trained_pattern`): a missing bundle is then a missing
# input, never a silent fallback to training.

import re


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
        return "[A-Za-z0-9][A-Za-z0-9-]*"
    return f"(?!(?:{'|'.join(re.escape(name) for name in imported)})/)[A-Za-z0-9][A-Za-z0-9-]*"


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
        }

    return params


rule import_target:
    input:
        source=checkpoint_source,
    output:
        store=directory(f"{RESULTS}/{{experiment}}/posterior/target.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/import_target.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/import_target.tsv"
    wildcard_constraints:
        experiment=names_pattern(imported_experiments()),
    conda:
        "../envs/symbnn.yaml"
    # the networks' accuracies on the test split are the import's main cost
    threads: compute("threads")
    resources:
        mem_mb=compute("mem_mb"),
        runtime=store_runtime(30),
    params:
        imported=import_params(pool=False),
    message:
        "Importing the released networks of the {wildcards.experiment} target posterior"
    script:
        "../workflow_scripts/import_checkpoints.py"


use rule import_target as import_pool with:
    output:
        store=directory(f"{RESULTS}/{{experiment}}/modes/pool.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/import_pool.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/import_pool.tsv"
    wildcard_constraints:
        experiment=names_pattern(imported_experiments(pool=True)),
    params:
        imported=import_params(pool=True),
    message:
        "Importing the released networks of the {wildcards.experiment} pool"


def imported_targets():
    """The weight marginals of every imported target posterior the run builds (appendix D.3 on
    the released networks; trained experiments get theirs from the marginals analysis)."""
    return [
        f"{RESULTS}/{name}/report/posterior_marginals.md"
        for name in RUN
        if name in imported_experiments()
    ]


rule posterior_marginals:
    input:
        store=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
        canonical=f"{RESULTS}/{{experiment}}/canonical/target.zarr",
    output:
        tests=f"{RESULTS}/{{experiment}}/marginals/ks_tests.parquet",
        summary=f"{RESULTS}/{{experiment}}/report/posterior_marginals.md",
    log:
        f"{RESULTS}/{{experiment}}/logs/posterior_marginals.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/posterior_marginals.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=store_runtime(30),
    message:
        "Weight marginals of the {wildcards.experiment} units before and after symmetry removal (KS tests)"
    script:
        "../workflow_scripts/posterior_marginals.py"
