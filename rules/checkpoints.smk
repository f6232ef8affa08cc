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
        experiment=names_pattern(imported_experiments(for_pool=True)),
    params:
        imported=import_params(pool=True),
    message:
        "Importing the released networks of the {wildcards.experiment} pool"
