# Report tables: how the target posterior trained, and what its store holds.


rule posterior_tables:
    message:
        "Tabulating the training results and store of {wildcards.experiment}"
    input:
        store=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
    output:
        training_csv=f"{RESULTS}/{{experiment}}/report/posterior_training.csv",
        training_md=f"{RESULTS}/{{experiment}}/report/posterior_training.md",
        samples_csv=f"{RESULTS}/{{experiment}}/report/posterior_samples.csv",
        store_csv=f"{RESULTS}/{{experiment}}/report/posterior_store.csv",
        store_md=f"{RESULTS}/{{experiment}}/report/posterior_store.md",
    log:
        f"{RESULTS}/{{experiment}}/logs/posterior_tables.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/posterior_tables.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../envs/symbnn.yaml"
    script:
        "../workflow_scripts/posterior_tables.py"
