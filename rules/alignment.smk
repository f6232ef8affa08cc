# Alignment modulo permutations (weight matching) and loss barriers: pairs of target networks
# and, where the experiment's `alignment.variational` asks, pairs of mean-field VI posteriors
# fitted for it. The jobs that evaluate networks along the paths (and fit the posteriors) get
# the experiment's compute resources: on a GPU experiment each is a GPU job.


rule alignment_barrier:
    input:
        store=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
        converged=ancient(f"{RESULTS}/{{experiment}}/posterior/converged.parquet"),
        accuracies=accuracies_input(TARGET),
    output:
        curves=f"{RESULTS}/{{experiment}}/alignment/curves.parquet",
        pairs=f"{RESULTS}/{{experiment}}/alignment/pairs.parquet",
        table=f"{RESULTS}/{{experiment}}/report/alignment_barrier.md",
        html=report(
            f"{RESULTS}/{{experiment}}/report/alignment_barrier.html",
            caption="../report/alignment_barrier.rst",
            category="6 Alignment",
            subcategory="{experiment}",
            labels={"table": "loss barrier", "experiment": "{experiment}"},
        ),
        figure=report(
            f"{RESULTS}/{{experiment}}/report/alignment_interpolation.png",
            caption="../report/alignment_interpolation.rst",
            category="6 Alignment",
            subcategory="{experiment}",
            labels={"figure": "interpolation", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/alignment_barrier.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/alignment_barrier.tsv"
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
        # the kept target networks: an acceptance rule keeping the same ones reruns nothing
        kept=kept_target_rows,
        alignment=alignment_params,
    message:
        "Aligning pairs of {wildcards.experiment} target networks and measuring the barriers between them"
    script:
        "../workflow_scripts/alignment_barrier.py"


rule variational_fit:
    output:
        fit=f"{RESULTS}/{{experiment}}/alignment/variational/{{seed}}.safetensors",
    log:
        f"{RESULTS}/{{experiment}}/logs/alignment/variational/{{seed}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/alignment/variational/{{seed}}.tsv"
    wildcard_constraints:
        seed=r"\d+",
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
        fit=variational_fit_params,
    message:
        "Fitting the mean-field VI posterior of seed {wildcards.seed} of {wildcards.experiment} (variational alignment)"
    script:
        "../workflow_scripts/variational_fit.py"


rule variational_barriers:
    input:
        fits=variational_fit_files,
    output:
        curves=f"{RESULTS}/{{experiment}}/alignment/variational_curves.parquet",
        pairs=f"{RESULTS}/{{experiment}}/alignment/variational_pairs.parquet",
        table=f"{RESULTS}/{{experiment}}/report/variational_barriers.md",
        html=report(
            f"{RESULTS}/{{experiment}}/report/variational_barriers.html",
            caption="../report/variational_barriers.rst",
            category="6 Alignment",
            subcategory="{experiment}",
            labels={"table": "VI barriers over pairs", "experiment": "{experiment}"},
        ),
        figure=report(
            f"{RESULTS}/{{experiment}}/report/variational_interpolation.png",
            caption="../report/variational_barriers.rst",
            category="6 Alignment",
            subcategory="{experiment}",
            labels={"figure": "VI interpolation", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/variational_barriers.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/variational_barriers.tsv"
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
        alignment=alignment_params,
        samples=variational_samples,
    message:
        "Aligning pairs of mean-field VI posteriors of {wildcards.experiment} and measuring the barriers between them"
    script:
        "../workflow_scripts/variational_barriers.py"
