# Posterior approximations: a pool of networks trained like the target (its converged ones are
# the modes), then per (method, variant) sampling jobs, their gathered sample store, and the
# predictions of every sample on the test and OOD sets.


use rule train_shard as train_pool_shard with:
    output:
        store=directory(f"{RESULTS}/{{experiment}}/modes/shards/{{shard}}.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/train_pool_shard/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/train_pool_shard/{{shard}}.tsv"
    params:
        experiment=training_config,
        seeds=lambda wc: symbnn.config.shard_seeds(pool_section(wc.experiment), wc.shard),
        data_root=config.get("data_root", "data"),
        download=config.get("download", False),
        device=config.get("device", "auto"),
    message:
        "Training the seeds of pool shard {wildcards.shard} of {wildcards.experiment} (modes of the methods)"


use rule gather_posterior as gather_pool with:
    input:
        shards=lambda wc: expand(
            f"{RESULTS}/{{experiment}}/modes/shards/{{shard}}.zarr",
            experiment=wc.experiment,
            shard=symbnn.config.shard_ids(pool_section(wc.experiment)),
        ),
    output:
        store=directory(f"{RESULTS}/{{experiment}}/modes/pool.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/gather_pool.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/gather_pool.tsv"
    message:
        "Gathering the {wildcards.experiment} pool shards into the pool store"


rule sample:
    input:
        pool=f"{RESULTS}/{{experiment}}/modes/pool.zarr",
    output:
        store=directory(
            f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/blocks/{{block}}.zarr"
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/sample/{{method}}/{{variant}}/{{block}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/sample/{{method}}/{{variant}}/{{block}}.tsv"
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
        # the method's own settings and the sample counts: editing another method's settings
        # leaves these jobs alone
        experiment=training_config,
        method=method_params,
        data_root=config.get("data_root", "data"),
        download=config.get("download", False),
        device=config.get("device", "auto"),
    message:
        "Sampling {wildcards.method} ({wildcards.variant}-mode, block {wildcards.block}) for {wildcards.experiment}"
    script:
        "../workflow_scripts/sample.py"


rule gather_samples:
    input:
        blocks=lambda wc: expand(
            f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/blocks/{{block}}.zarr",
            experiment=wc.experiment,
            method=wc.method,
            variant=wc.variant,
            block=sample_blocks(wc),
        ),
    output:
        store=directory(f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/samples.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/gather_samples/{{method}}/{{variant}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/gather_samples/{{method}}/{{variant}}.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    message:
        "Gathering the {wildcards.method} ({wildcards.variant}-mode) samples of {wildcards.experiment}"
    script:
        "../workflow_scripts/gather_samples.py"


rule predict:
    input:
        store=f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/samples.zarr",
    output:
        predictions=directory(
            f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/predictions.zarr"
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/predict/{{method}}/{{variant}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/predict/{{method}}/{{variant}}.tsv"
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
        data=lambda wc: key_sorted(EXPERIMENTS[wc.experiment]["data"]),
        batch=lambda wc: EXPERIMENTS[wc.experiment]["methods"].get("predict_batch", 1000),
        data_root=config.get("data_root", "data"),
        download=config.get("download", False),
        device=config.get("device", "auto"),
    message:
        "Predicting the test and OOD sets with every {wildcards.method} ({wildcards.variant}-mode) sample of {wildcards.experiment}"
    script:
        "../workflow_scripts/predict.py"
