# The target posterior: shards of seeds trained at once, gathered into one Zarr store.


rule train_shard:
    output:
        store=directory(f"{RESULTS}/{{experiment}}/posterior/shards/{{shard}}.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/train_shard/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/train_shard/{{shard}}.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: lambda wc: compute(wc, "threads", 1)
    resources:
        mem_mb=lambda wc: compute(wc, "mem_mb", 2000),
        runtime=lambda wc: compute(wc, "runtime_min", 60),
        gpu=lambda wc: compute(wc, "gpus", 0),
        cpus_per_gpu=cpus_per_gpu,
        slurm_partition=train_partition,
    params:
        # Editing the recipe, model or data reruns every shard (and all that follows).
        experiment=training_config,
        seeds=lambda wc: symbnn.config.shard_seeds(
            EXPERIMENTS[wc.experiment]["posterior"], wc.shard
        ),
        data_root=config.get("data_root", "data"),
        download=config.get("download", False),
        device=config.get("device", "auto"),
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
