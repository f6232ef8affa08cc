# The target posterior: shards of seeds trained at once, gathered into one Zarr store, then
# flagged converged or not by a light rule (changing the threshold retrains nothing).


rule train_shard:
    output:
        store=directory(f"{RESULTS}/{{experiment}}/posterior/shards/{{shard}}.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/train_shard/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/train_shard/{{shard}}.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: compute("threads")
    resources:
        mem_mb=compute("mem_mb"),
        runtime=compute("runtime_min"),
        gpu=compute("gpus"),
        cpus_per_gpu=cpus_per_gpu,
        slurm_partition=train_partition,
    params:
        # editing the recipe, model or data reruns every shard (and all that follows)
        training=training_params,
        seeds=target_shard_seeds,
    message:
        "Training the seeds of shard {wildcards.shard} of {wildcards.experiment}"
    script:
        "../workflow_scripts/train_shard.py"


rule gather_posterior:
    input:
        shards=target_shards,
    output:
        store=directory(f"{RESULTS}/{{experiment}}/posterior/target.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/gather_posterior.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/gather_posterior.tsv"
    wildcard_constraints:
        # experiments whose target is imported (rules/checkpoints.smk) never train one
        experiment=trained_pattern(),
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=store_runtime(30),
    message:
        "Gathering the {wildcards.experiment} shards into the target posterior store"
    script:
        "../workflow_scripts/gather_posterior.py"


rule convergence:
    input:
        store=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
    output:
        table=f"{RESULTS}/{{experiment}}/posterior/converged.parquet",
    log:
        f"{RESULTS}/{{experiment}}/logs/convergence.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/convergence.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        acceptance=acceptance_params,
    message:
        "Flagging the {wildcards.experiment} target networks converged or not"
    script:
        "../workflow_scripts/convergence.py"


# The test accuracy of every network of a store (target or pool), which no setting of the
# acceptance rule changes: from it the planning knows which networks the rule keeps
# (rules/common.smk, `acceptance_of`), so that jobs reading only the kept networks hold their
# rows in their params. A checkpoint: jobs planned on a store still to be trained are planned
# again once it is.
checkpoint accuracies:
    input:
        store=f"{RESULTS}/{{experiment}}/{{store}}.zarr",
    output:
        table=f"{RESULTS}/{{experiment}}/{{store}}_accuracies.parquet",
    log:
        f"{RESULTS}/{{experiment}}/logs/accuracies/{{store}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/accuracies/{{store}}.tsv"
    wildcard_constraints:
        store=f"{TARGET}|{POOL}",
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    message:
        "Reading the test accuracies of the {wildcards.experiment} networks in {wildcards.store}"
    script:
        "../workflow_scripts/accuracies.py"


# Evidence that the recipe reaches its plateau: the first target seeds trained for twice the
# epochs (src/symbnn/plateau.py), their test accuracy at 1x and 2x side by side in the report.
use rule train_shard as train_plateau with:
    output:
        store=directory(f"{RESULTS}/{{experiment}}/posterior/plateau.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/train_plateau.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/train_plateau.tsv"
    params:
        training=plateau_training_params,
        seeds=plateau_seeds,
    message:
        "Training the first target seeds of {wildcards.experiment} for twice the epochs"


rule plateau:
    input:
        target=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
        longer=f"{RESULTS}/{{experiment}}/posterior/plateau.zarr",
    output:
        parquet=f"{RESULTS}/{{experiment}}/posterior/plateau.parquet",
        md=f"{RESULTS}/{{experiment}}/report/plateau.md",
        html=report(
            f"{RESULTS}/{{experiment}}/report/plateau.html",
            caption="../report/plateau.rst",
            category="1 Target posterior",
            subcategory="{experiment}",
            labels={"table": "trained to its plateau", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/plateau.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/plateau.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    message:
        "Comparing the {wildcards.experiment} seeds trained for 1x and 2x the epochs"
    script:
        "../workflow_scripts/plateau.py"
