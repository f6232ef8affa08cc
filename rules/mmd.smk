# Layer-wise MMD against the target posterior: the Deep Ensembles check (converged target
# checkpoints set aside as the ensemble, compared with the disjoint rest) and every method.


rule mmd_deep_ensembles:
    input:
        target=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
        canonical=f"{RESULTS}/{{experiment}}/canonical/target.zarr",
        converged=ancient(f"{RESULTS}/{{experiment}}/posterior/converged.parquet"),
        accuracies=accuracies_input(TARGET),
    output:
        per_layer=f"{RESULTS}/{{experiment}}/mmd/deep_ensembles/per_layer.parquet",
        summary=f"{RESULTS}/{{experiment}}/mmd/deep_ensembles/summary.parquet",
        summary_md=f"{RESULTS}/{{experiment}}/report/mmd_deep_ensembles.md",
        summary_html=report(
            f"{RESULTS}/{{experiment}}/report/mmd_deep_ensembles.html",
            caption="../report/mmd_deep_ensembles.rst",
            category="1 Target posterior",
            subcategory="{experiment}",
            labels={"table": "Deep Ensembles check", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/mmd_deep_ensembles.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/mmd_deep_ensembles.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: compute("threads")
    resources:
        mem_mb=mmd_mem_mb,
        runtime=120,
        gpu=mmd_gpus,
        slurm_partition=mmd_partition,
    params:
        # the kept target networks: an acceptance rule keeping the same ones reruns nothing
        kept=kept_target_rows,
        mmd=section_params("mmd"),
    message:
        "Layer-wise MMD of a Deep Ensemble of {wildcards.experiment} checkpoints vs the rest"
    script:
        "../workflow_scripts/mmd_deep_ensembles.py"


rule mmd_method:
    input:
        target=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
        target_canonical=f"{RESULTS}/{{experiment}}/canonical/target.zarr",
        converged=ancient(f"{RESULTS}/{{experiment}}/posterior/converged.parquet"),
        accuracies=accuracies_input(TARGET),
        samples=f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/samples.zarr",
        samples_canonical=f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/canonical.zarr",
    output:
        per_layer=f"{RESULTS}/{{experiment}}/mmd/{{method}}/{{variant}}/per_layer.parquet",
        summary=f"{RESULTS}/{{experiment}}/mmd/{{method}}/{{variant}}/summary.parquet",
        # each unit's canonical width per layer against the target's (symbnn.mmd.spread)
        spread=f"{RESULTS}/{{experiment}}/mmd/{{method}}/{{variant}}/spread.parquet",
    log:
        f"{RESULTS}/{{experiment}}/logs/mmd/{{method}}/{{variant}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/mmd/{{method}}/{{variant}}.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: compute("threads")
    resources:
        mem_mb=mmd_mem_mb,
        runtime=120,
        gpu=mmd_gpus,
        slurm_partition=mmd_partition,
    params:
        # the kept target networks: an acceptance rule keeping the same ones reruns nothing
        kept=kept_target_rows,
        # only the test settings: the Deep Ensembles check's member count is not one of them
        pvalue=section_params("mmd", "methods_tested"),
        seed=section_params("mmd", "seed"),
    message:
        "Layer-wise MMD of the {wildcards.method} ({wildcards.variant}-mode) samples vs the {wildcards.experiment} target posterior"
    script:
        "../workflow_scripts/mmd_method.py"
