# Alignment modulo permutations (weight matching) and loss barriers between two target networks.


rule alignment_barrier:
    input:
        store=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
        converged=f"{RESULTS}/{{experiment}}/posterior/converged.parquet",
    output:
        curves=f"{RESULTS}/{{experiment}}/alignment/curves.parquet",
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
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        alignment=section_params("alignment"),
    message:
        "Aligning two {wildcards.experiment} target networks and measuring the loss barrier between them"
    script:
        "../workflow_scripts/alignment_barrier.py"
