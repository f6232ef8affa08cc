# Alignment modulo permutations (weight matching) and loss barriers between two target
# networks; mean-field VI alignment and the symmetrised variational family on a toy MLP task.


rule alignment_barrier:
    input:
        store=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
    output:
        curves=f"{RESULTS}/{{experiment}}/alignment/curves.parquet",
        table=f"{RESULTS}/{{experiment}}/report/alignment_barrier.md",
        html=report(
            f"{RESULTS}/{{experiment}}/report/alignment_barrier.html",
            caption="../report/alignment_barrier.rst",
            category="Alignment",
            subcategory="{experiment}",
            labels={"table": "loss barrier", "experiment": "{experiment}"},
        ),
        figure=report(
            f"{RESULTS}/{{experiment}}/report/alignment_interpolation.png",
            caption="../report/alignment_interpolation.rst",
            category="Alignment",
            subcategory="{experiment}",
            labels={"figure": "interpolation", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/alignment_barrier.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/alignment_barrier.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        alignment=alignment_options("splits", "points", "bn_batches", "max_sweeps"),
        data_root=config.get("data_root", "data"),
    message:
        "Aligning two {wildcards.experiment} target networks and measuring the loss barrier between them"
    script:
        "../workflow_scripts/alignment_barrier.py"


rule symmetrised_vi:
    output:
        runs=f"{RESULTS}/{{experiment}}/symmetrised_vi/runs.parquet",
        table=f"{RESULTS}/{{experiment}}/report/symmetrised_vi.md",
        html=report(
            f"{RESULTS}/{{experiment}}/report/symmetrised_vi.html",
            caption="../report/symmetrised_vi.rst",
            category="Alignment",
            subcategory="{experiment}",
            labels={"table": "symmetrised VI", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/symmetrised_vi.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/symmetrised_vi.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        settings=symmetrised_vi_settings,
    message:
        "Symmetrised vs mean-field variational posterior on the two-Gaussian MLP task ({wildcards.experiment})"
    script:
        "../workflow_scripts/symmetrised_vi.py"


rule variational_alignment:
    output:
        curves=f"{RESULTS}/{{experiment}}/symmetrised_vi/alignment_curves.parquet",
        table=f"{RESULTS}/{{experiment}}/report/variational_alignment.md",
        html=report(
            f"{RESULTS}/{{experiment}}/report/variational_alignment.html",
            caption="../report/variational_alignment.rst",
            category="Alignment",
            subcategory="{experiment}",
            labels={"table": "VI loss barrier", "experiment": "{experiment}"},
        ),
        figure=report(
            f"{RESULTS}/{{experiment}}/report/variational_alignment.png",
            caption="../report/variational_alignment.rst",
            category="Alignment",
            subcategory="{experiment}",
            labels={"figure": "VI interpolation", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/variational_alignment.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/variational_alignment.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        alignment=alignment_options("points", "vi_samples"),
        settings=symmetrised_vi_settings,
    message:
        "Aligning two mean-field variational posteriors of the toy MLP task ({wildcards.experiment})"
    script:
        "../workflow_scripts/variational_alignment.py"
