# Posterior approximations: a pool of networks trained like the target (its converged ones are
# the modes); per method one fit job per block of modes, shared by both variants, and per
# (method, variant) one draw job writing the variant's sample store; then the predictions of
# every sample on the test and OOD sets.


use rule train_shard as train_pool_shard with:
    output:
        store=directory(f"{RESULTS}/{{experiment}}/modes/shards/{{shard}}.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/train_pool_shard/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/train_pool_shard/{{shard}}.tsv"
    params:
        training=training_params,
        seeds=pool_shard_seeds,
    message:
        "Training the seeds of pool shard {wildcards.shard} of {wildcards.experiment} (modes of the methods)"


use rule gather_posterior as gather_pool with:
    input:
        shards=pool_shards,
    output:
        store=directory(f"{RESULTS}/{{experiment}}/modes/pool.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/gather_pool.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/gather_pool.tsv"
    wildcard_constraints:
        experiment=trained_pattern(for_pool=True),
    message:
        "Gathering the {wildcards.experiment} pool shards into the pool store"


use rule convergence as pool_convergence with:
    input:
        store=f"{RESULTS}/{{experiment}}/modes/pool.zarr",
    output:
        table=f"{RESULTS}/{{experiment}}/modes/converged.parquet",
    log:
        f"{RESULTS}/{{experiment}}/logs/pool_convergence.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/pool_convergence.tsv"
    message:
        "Flagging the {wildcards.experiment} pool networks converged or not"


rule fit:
    input:
        pool=f"{RESULTS}/{{experiment}}/modes/pool.zarr",
        # the modes' pool rows and the threshold are in the params (fit_params)
        accuracies=accuracies_input(POOL),
    output:
        fits=f"{RESULTS}/{{experiment}}/methods/{{method}}/fits/{{block}}.safetensors",
    log:
        f"{RESULTS}/{{experiment}}/logs/fit/{{method}}/{{block}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/fit/{{method}}/{{block}}.tsv"
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
        # the method's own fit settings: editing another method's, or a setting used only
        # when drawing, leaves these jobs alone
        training=training_params,
        fit=fit_params,
    message:
        "Fitting {wildcards.method} at mode block {wildcards.block} of {wildcards.experiment}"
    script:
        "../workflow_scripts/fit.py"


rule sample:
    input:
        fits=fit_files,
    output:
        store=directory(f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/samples.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/sample/{{method}}/{{variant}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/sample/{{method}}/{{variant}}.tsv"
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
        training=training_params,
        sample=sample_params,
    message:
        "Drawing the {wildcards.method} ({wildcards.variant}-mode) samples of {wildcards.experiment}"
    script:
        "../workflow_scripts/sample.py"


rule predict:
    input:
        unpack(predict_inputs),
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
    threads: compute("threads")
    resources:
        mem_mb=compute("mem_mb"),
        runtime=compute("runtime_min"),
        gpu=compute("gpus"),
        cpus_per_gpu=cpus_per_gpu,
        slurm_partition=train_partition,
    params:
        data=section_params("data"),
        predictive=predictive,
    message:
        "Predicting the test and OOD sets with every {wildcards.method} ({wildcards.variant}-mode) sample of {wildcards.experiment}"
    script:
        "../workflow_scripts/predict.py"
