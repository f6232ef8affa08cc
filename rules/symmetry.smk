# Symmetry removal (canonical form), the min-mass problem on the target posterior, and the
# symmetry counts.


rule canonicalize:
    input:
        store=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
    output:
        store=directory(f"{RESULTS}/{{experiment}}/canonical/target.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/canonicalize.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/canonicalize.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=store_runtime(60),
    params:
        scale=section_params("symmetry", "scale"),
        key=section_params("symmetry", "key"),
    message:
        "Removing the weight-space symmetries of the {wildcards.experiment} posterior"
    script:
        "../workflow_scripts/canonicalize.py"


rule minmass:
    input:
        store=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
    output:
        table=f"{RESULTS}/{{experiment}}/minmass/masses.parquet",
    log:
        f"{RESULTS}/{{experiment}}/logs/minmass.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/minmass.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        solver=section_params("symmetry", "solver"),
    message:
        "Solving the min-mass problem for every network of {wildcards.experiment}"
    script:
        "../workflow_scripts/minmass.py"


rule minmass_report:
    input:
        table=f"{RESULTS}/{{experiment}}/minmass/masses.parquet",
        converged=ancient(f"{RESULTS}/{{experiment}}/posterior/converged.parquet"),
        accuracies=accuracies_input(TARGET),
    output:
        figure=report(
            f"{RESULTS}/{{experiment}}/report/minmass.png",
            caption="../report/minmass.rst",
            category="2 Symmetry removal",
            subcategory="{experiment}",
            labels={
                "figure": "min-mass before and after (Figure 2)",
                "experiment": "{experiment}",
            },
        ),
        summary=f"{RESULTS}/{{experiment}}/report/minmass_summary.md",
    log:
        f"{RESULTS}/{{experiment}}/logs/minmass_report.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/minmass_report.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        # the kept target networks: an acceptance rule keeping the same ones reruns nothing
        kept=kept_target_rows,
    message:
        "Plotting the mass distributions of {wildcards.experiment} (paper Figure 2)"
    script:
        "../workflow_scripts/minmass_report.py"


rule symmetry_counts:
    # counted from the models' structures alone (built on the meta device), and for a small
    # model the D.1 mode count measured on the experiment's canonical target posterior
    input:
        unpack(mode_count_inputs),
    output:
        modes=f"{RESULTS}/{{experiment}}/symmetry/mode_counts.parquet",
        csv=f"{RESULTS}/{{experiment}}/report/symmetry_counts.csv",
        md=f"{RESULTS}/{{experiment}}/report/symmetry_counts.md",
        html=report(
            f"{RESULTS}/{{experiment}}/report/symmetry_counts.html",
            caption="../report/symmetry_counts.rst",
            category="2 Symmetry removal",
            subcategory="{experiment}",
            labels={"table": "symmetry counts (D.4, D.1)", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/symmetry_counts.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/symmetry_counts.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        kept=mode_count_params,
        architectures=symbnn.report.symmetry_counts.counted_architectures(SETTINGS),
    message:
        "Counting the weight-space symmetries of every architecture the report covers (paper D.4), and the D.1 modes of {wildcards.experiment}"
    script:
        "../workflow_scripts/symmetry_counts.py"


use rule canonicalize as canonicalize_samples with:
    input:
        store=f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/samples.zarr",
    output:
        store=directory(f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/canonical.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/canonicalize/{{method}}/{{variant}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/canonicalize/{{method}}/{{variant}}.tsv"
    message:
        "Removing the weight-space symmetries of the {wildcards.method} ({wildcards.variant}-mode) samples of {wildcards.experiment}"
