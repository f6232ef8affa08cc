# The full-batch HMC reference posterior (docs/maths.md 4.7): chains from the pool's kept
# modes (or the prior) into reference/hmc.zarr, their diagnostics on raw and canonical
# weights and on function-space quantities, and the layer-wise MMD of the paper's target and
# of every method against it. Built by the target rule reference_all (`make run-hmc`), and by
# every run for an experiment whose reference is enabled (symbnn.reference.plan).
# Its input and params functions: rules/reference_common.smk (Snakemake's lint wants rules and
# functions in separate files).


rule reference_chains:
    input:
        unpack(reference_inputs),
    output:
        store=directory(f"{RESULTS}/{{experiment}}/reference/hmc.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/reference_chains.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/reference_chains.tsv"
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
        reference=section_params("reference"),
        rows=reference_start_rows,
    message:
        "Running the full-batch HMC reference chains of {wildcards.experiment}"
    script:
        "../workflow_scripts/reference_chains.py"


use rule canonicalize as canonicalize_reference with:
    input:
        store=f"{RESULTS}/{{experiment}}/reference/hmc.zarr",
    output:
        store=directory(f"{RESULTS}/{{experiment}}/reference/canonical.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/canonicalize_reference.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/canonicalize_reference.tsv"
    message:
        "Removing the weight-space symmetries of the {wildcards.experiment} HMC reference"


rule reference_diagnostics:
    input:
        store=f"{RESULTS}/{{experiment}}/reference/hmc.zarr",
        canonical=f"{RESULTS}/{{experiment}}/reference/canonical.zarr",
    output:
        chains=f"{RESULTS}/{{experiment}}/reference/chains.parquet",
        table=f"{RESULTS}/{{experiment}}/reference/diagnostics.parquet",
        summary_md=f"{RESULTS}/{{experiment}}/report/reference_diagnostics.md",
        chains_html=report(
            f"{RESULTS}/{{experiment}}/report/reference_chains.html",
            caption="../report/reference_chains.rst",
            category=REFERENCE_CATEGORY,
            subcategory="{experiment}",
            labels={"table": "HMC chains", "experiment": "{experiment}"},
        ),
        side_by_side_html=report(
            f"{RESULTS}/{{experiment}}/report/reference_diagnostics.html",
            caption="../report/reference_diagnostics.rst",
            category=REFERENCE_CATEGORY,
            subcategory="{experiment}",
            labels={"table": "R-hat and ESS: raw vs canonical", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/reference_diagnostics.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/reference_diagnostics.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        data=section_params("data"),
        digits=section_params("reference", "test_digits"),
    message:
        "Diagnosing the {wildcards.experiment} HMC chains on raw and canonical weights and on their predictions"
    script:
        "../workflow_scripts/reference_diagnostics.py"


rule reference_mmd_target:
    input:
        reference=f"{RESULTS}/{{experiment}}/reference/hmc.zarr",
        reference_canonical=f"{RESULTS}/{{experiment}}/reference/canonical.zarr",
        samples=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
        samples_canonical=f"{RESULTS}/{{experiment}}/canonical/target.zarr",
        converged=ancient(f"{RESULTS}/{{experiment}}/posterior/converged.parquet"),
        accuracies=accuracies_input(TARGET),
    output:
        per_layer=f"{RESULTS}/{{experiment}}/reference/mmd/target/per_layer.parquet",
        summary=f"{RESULTS}/{{experiment}}/reference/mmd/target/summary.parquet",
    log:
        f"{RESULTS}/{{experiment}}/logs/reference_mmd/target.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/reference_mmd/target.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 2
    resources:
        mem_mb=mmd_mem_mb,
        runtime=120,
        gpu=mmd_gpus,
        slurm_partition=mmd_partition,
    params:
        kept=kept_target_rows,
        seed=section_params("mmd", "seed"),
    message:
        "Layer-wise MMD of the {wildcards.experiment} target posterior vs the HMC reference"
    script:
        "../workflow_scripts/reference_mmd.py"


use rule reference_mmd_target as reference_mmd_method with:
    input:
        reference=f"{RESULTS}/{{experiment}}/reference/hmc.zarr",
        reference_canonical=f"{RESULTS}/{{experiment}}/reference/canonical.zarr",
        samples=f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/samples.zarr",
        samples_canonical=f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/canonical.zarr",
    output:
        per_layer=f"{RESULTS}/{{experiment}}/reference/mmd/{{method}}/{{variant}}/per_layer.parquet",
        summary=f"{RESULTS}/{{experiment}}/reference/mmd/{{method}}/{{variant}}/summary.parquet",
    log:
        f"{RESULTS}/{{experiment}}/logs/reference_mmd/{{method}}/{{variant}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/reference_mmd/{{method}}/{{variant}}.tsv"
    params:
        kept=None,
        seed=section_params("mmd", "seed"),
    message:
        "Layer-wise MMD of the {wildcards.method} ({wildcards.variant}-mode) samples vs the {wildcards.experiment} HMC reference"


rule reference_mmd_table:
    input:
        summaries=reference_mmd_summaries,
    output:
        table=f"{RESULTS}/{{experiment}}/reference/mmd.parquet",
        summary_md=f"{RESULTS}/{{experiment}}/report/reference_mmd.md",
        summary_html=report(
            f"{RESULTS}/{{experiment}}/report/reference_mmd.html",
            caption="../report/reference_mmd.rst",
            category=REFERENCE_CATEGORY,
            subcategory="{experiment}",
            labels={"table": "MMD vs HMC", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/reference_mmd_table.log",
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    message:
        "Tabulating the layer-wise MMD against the {wildcards.experiment} HMC reference"
    script:
        "../workflow_scripts/reference_mmd_table.py"


use rule predict as predict_reference with:
    input:
        store=f"{RESULTS}/{{experiment}}/reference/hmc.zarr",
    output:
        predictions=directory(f"{RESULTS}/{{experiment}}/reference/predictions.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/predict_reference.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/predict_reference.tsv"
    params:
        data=section_params("data"),
        predictive="sampled",
    message:
        "Predicting the test and OOD sets with every HMC reference sample of {wildcards.experiment}"


rule reference_predictive:
    input:
        reference=f"{RESULTS}/{{experiment}}/reference/predictions.zarr",
        reference_store=f"{RESULTS}/{{experiment}}/reference/hmc.zarr",
        target=f"{RESULTS}/{{experiment}}/posterior/predictions.zarr",
        converged=ancient(f"{RESULTS}/{{experiment}}/posterior/converged.parquet"),
        accuracies=accuracies_input(TARGET),
        predictions=variant_files("methods/{method}/{variant}/predictions.zarr"),
        samples=variant_files("methods/{method}/{variant}/samples.zarr"),
    output:
        units=f"{RESULTS}/{{experiment}}/reference/predictive.parquet",
        chains=f"{RESULTS}/{{experiment}}/reference/predictive_chains.parquet",
        table=f"{RESULTS}/{{experiment}}/reference/predictive_summary.parquet",
        summary_md=f"{RESULTS}/{{experiment}}/report/reference_predictive.md",
        summary_html=report(
            f"{RESULTS}/{{experiment}}/report/reference_predictive.html",
            caption="../report/reference_predictive.rst",
            category=REFERENCE_CATEGORY,
            subcategory="{experiment}",
            labels={"table": "agreement and TV vs HMC", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/reference_predictive.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/reference_predictive.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        kept=kept_target_rows,
        variants=reference_variants,
    message:
        "Top-1 agreement and total variation of the {wildcards.experiment} target and methods vs the HMC reference"
    script:
        "../workflow_scripts/reference_predictive.py"


rule reference_metrics:
    input:
        predictions=f"{RESULTS}/{{experiment}}/reference/predictions.zarr",
        store=f"{RESULTS}/{{experiment}}/reference/hmc.zarr",
    output:
        table=f"{RESULTS}/{{experiment}}/reference/metrics.parquet",
        summary_md=f"{RESULTS}/{{experiment}}/report/reference_metrics.md",
        summary_html=report(
            f"{RESULTS}/{{experiment}}/report/reference_metrics.html",
            caption="../report/reference_metrics.rst",
            category=REFERENCE_CATEGORY,
            subcategory="{experiment}",
            labels={"table": "HMC uncertainty metrics", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/reference_metrics.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/reference_metrics.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        score=section_params("metrics", "ood_score"),
        bins=section_params("metrics", "bins"),
    message:
        "Uncertainty metrics of the {wildcards.experiment} HMC reference's predictions"
    script:
        "../workflow_scripts/reference_metrics.py"


rule reference_findings:
    input:
        units=f"{RESULTS}/{{experiment}}/reference/predictive.parquet",
        chains=f"{RESULTS}/{{experiment}}/reference/predictive_chains.parquet",
    output:
        table=f"{RESULTS}/{{experiment}}/reference/findings.parquet",
        summary_md=f"{RESULTS}/{{experiment}}/report/reference_findings.md",
        summary_html=report(
            f"{RESULTS}/{{experiment}}/report/reference_findings.html",
            caption="../report/reference_findings.rst",
            category=REFERENCE_CATEGORY,
            subcategory="{experiment}",
            labels={"table": "findings vs HMC", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/reference_findings.log",
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    message:
        "Deciding whether the {wildcards.experiment} target and each method are close to the HMC reference"
    script:
        "../workflow_scripts/reference_findings.py"


# asked for by name only (`make run-hmc`): its inputs are planned then, not on every run
rule reference_all:
    input:
        lambda wildcards: reference_targets(enabled_only=False),
