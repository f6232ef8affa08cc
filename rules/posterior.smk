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
        seeds=lambda wc: experiment_of(wc).posterior.shard_seeds(wc.shard),
    message:
        "Training the seeds of shard {wildcards.shard} of {wildcards.experiment}"
    script:
        "../workflow_scripts/train_shard.py"


rule gather_posterior:
    input:
        shards=lambda wc: expand(
            f"{RESULTS}/{{experiment}}/posterior/shards/{{shard}}.zarr",
            experiment=wc.experiment,
            shard=shard_ids(wc.experiment),
        ),
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
        min_accuracy=section_params("posterior", "min_accuracy"),
    message:
        "Flagging the {wildcards.experiment} target networks converged or not"
    script:
        "../workflow_scripts/convergence.py"
