# Report tables: how the target posterior trained, and what its store holds.


rule posterior_tables:
    input:
        store=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
        # what the acceptance rule kept and why: these tables report the rule
        converged=f"{RESULTS}/{{experiment}}/posterior/converged.parquet",
    output:
        training_csv=f"{RESULTS}/{{experiment}}/report/posterior_training.csv",
        training_md=f"{RESULTS}/{{experiment}}/report/posterior_training.md",
        samples_csv=f"{RESULTS}/{{experiment}}/report/posterior_samples.csv",
        store_csv=f"{RESULTS}/{{experiment}}/report/posterior_store.csv",
        store_md=f"{RESULTS}/{{experiment}}/report/posterior_store.md",
        training_html=report(
            f"{RESULTS}/{{experiment}}/report/posterior_training.html",
            caption="../report/posterior_training.rst",
            category="1 Target posterior",
            subcategory="{experiment}",
            labels={"table": "training summary", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/posterior_tables.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/posterior_tables.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    message:
        "Tabulating the training results and store of {wildcards.experiment}"
    script:
        "../workflow_scripts/posterior_tables.py"


rule metrics:
    input:
        predictions=f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/predictions.zarr",
        samples=f"{RESULTS}/{{experiment}}/methods/{{method}}/{{variant}}/samples.zarr",
        # the modes' own accuracies, shown beside each row's (which networks they are: params)
        pool_converged=ancient(f"{RESULTS}/{{experiment}}/modes/converged.parquet"),
        accuracies=accuracies_input(POOL),
    output:
        row=f"{RESULTS}/{{experiment}}/metrics/{{method}}/{{variant}}.parquet",
    log:
        f"{RESULTS}/{{experiment}}/logs/metrics/{{method}}/{{variant}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/metrics/{{method}}/{{variant}}.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        score=section_params("metrics", "ood_score"),
        bins=section_params("metrics", "bins"),
        modes=method_mode_rows,
    message:
        "Uncertainty metrics of the {wildcards.method} ({wildcards.variant}-mode) predictions of {wildcards.experiment}"
    script:
        "../workflow_scripts/metrics.py"


rule method_tables:
    input:
        mmd=variant_files("mmd/{method}/{variant}/summary.parquet"),
        metrics=variant_files("metrics/{method}/{variant}.parquet"),
        spread=variant_files("mmd/{method}/{variant}/spread.parquet"),
        converged=ancient(f"{RESULTS}/{{experiment}}/posterior/converged.parquet"),
        accuracies=accuracies_input(TARGET),
    output:
        **{
            f"{name}_{suffix}": f"{RESULTS}/{{experiment}}/report/{name}.{suffix}"
            for name in ("table1", "table1_units", "table2", "findings", "table1_paper", "spread")
            for suffix in ("parquet", "csv", "md", "tex")
        },
        table1_paper_html=report(
            f"{RESULTS}/{{experiment}}/report/table1_paper.html",
            caption="../report/table1_paper.rst",
            category="4 Posterior approximations",
            subcategory="{experiment}",
            labels={"table": "1 beside the paper's", "experiment": "{experiment}"},
        ),
        table1_html=report(
            f"{RESULTS}/{{experiment}}/report/table1.html",
            caption="../report/table1.rst",
            category="4 Posterior approximations",
            subcategory="{experiment}",
            labels={"table": "1: MMD and uncertainty", "experiment": "{experiment}"},
        ),
        table2_html=report(
            f"{RESULTS}/{{experiment}}/report/table2.html",
            caption="../report/table2.rst",
            category="4 Posterior approximations",
            subcategory="{experiment}",
            labels={"table": "2: MMD statistics", "experiment": "{experiment}"},
        ),
        findings_html=report(
            f"{RESULTS}/{{experiment}}/report/findings.html",
            caption="../report/findings.rst",
            category="5 Findings",
            subcategory="{experiment}",
            labels={"table": "findings", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/method_tables.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/method_tables.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        # the kept target networks: an acceptance rule keeping the same ones reruns nothing
        kept=kept_target_rows,
        # the paper's Table 1 block printed beside ours is chosen by the dataset
        dataset=section_params("data", "train"),
        labels=method_labels,
    message:
        "Tables 1 and 2 of {wildcards.experiment}: MMD, NS MMD and uncertainty metrics per method"
    script:
        "../workflow_scripts/method_tables.py"


use rule predict as predict_target with:
    input:
        store=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
    output:
        predictions=directory(f"{RESULTS}/{{experiment}}/posterior/predictions.zarr"),
    log:
        f"{RESULTS}/{{experiment}}/logs/predict_target.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/predict_target.tsv"
    params:
        data=section_params("data"),
        predictive="sampled",
    message:
        "Predicting the test and OOD sets with every target network of {wildcards.experiment}"


rule functional_collapse:
    input:
        converged=ancient(f"{RESULTS}/{{experiment}}/posterior/converged.parquet"),
        accuracies=accuracies_input(TARGET),
        predictions=f"{RESULTS}/{{experiment}}/posterior/predictions.zarr",
    output:
        pairs=f"{RESULTS}/{{experiment}}/collapse/pairs.parquet",
        summary_md=f"{RESULTS}/{{experiment}}/report/collapse.md",
        summary_html=report(
            f"{RESULTS}/{{experiment}}/report/collapse.html",
            caption="../report/collapse.rst",
            category="3 Functional collapse",
            subcategory="{experiment}",
            labels={"table": "pairwise MI summary", "experiment": "{experiment}"},
        ),
        figure=report(
            f"{RESULTS}/{{experiment}}/report/collapse.png",
            caption="../report/collapse.rst",
            category="3 Functional collapse",
            subcategory="{experiment}",
            labels={"figure": "pairwise MI (Figure 3)", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/functional_collapse.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/functional_collapse.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        # the kept target networks: an acceptance rule keeping the same ones reruns nothing
        kept=kept_target_rows,
        collapse=section_params("collapse"),
    message:
        "Functional collapse in {wildcards.experiment}: pairwise MI of target networks, ID vs OOD"
    script:
        "../workflow_scripts/functional_collapse.py"
