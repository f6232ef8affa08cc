# A target posterior (and, where asked, the methods' pool) imported from the authors' released
# networks instead of trained: experiments with `posterior: {source: checkpoints}`. The import
# rules match only those experiments, and gathering trained shards (rules/posterior.smk,
# rules/methods.smk) only the others (`trained_pattern`): a missing bundle is then a missing
# input, never a silent fallback to training.


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
