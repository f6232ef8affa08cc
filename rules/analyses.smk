# The paper's further analyses: the toy posterior (Figure 1), the frequency of permutations
# during training (section 5.2, Figure 4) and the layer-wise marginals (appendix D.3, Figure 9).
# The toy and the marginals stand apart from the experiments; the permutation frequency trains
# a few networks with an experiment's data, model and recipe.

import functools

import symbnn.analyses.plan

ANALYSES = symbnn.analyses.plan.analyses_folder(config)
# the files `rule all` asks for (see symbnn.analyses.plan: a block set to false is skipped)
analyses_targets = functools.partial(symbnn.analyses.plan.targets, config)


rule analyses:
    # what dvc.yaml's `analyses` stage builds: the experiment-independent analyses only
    input:
        [target for target in analyses_targets() if target.startswith(f"{ANALYSES}/")],


rule toy_posterior:
    output:
        weights=f"{ANALYSES}/toy/output_weights.parquet",
        summary_md=f"{ANALYSES}/report/toy_summary.md",
        summary_html=report(
            f"{ANALYSES}/report/toy_summary.html",
            caption="../report/toy_summary.rst",
            category="1 Toy posterior",
            labels={"table": "networks kept and function check"},
        ),
        figure=report(
            f"{ANALYSES}/report/toy_posterior.png",
            caption="../report/toy_posterior.rst",
            category="1 Toy posterior",
            labels={"figure": "output-layer weights (Figure 1)"},
        ),
    log:
        f"{ANALYSES}/logs/toy_posterior.log",
    benchmark:
        f"{ANALYSES}/benchmarks/toy_posterior.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        settings=key_sorted(symbnn.analyses.plan.settings(config, "toy")),
    message:
        "Toy posterior (paper Figure 1): training two-layer perceptrons on two Gaussian classes and removing their symmetries"
    script:
        "../workflow_scripts/toy_posterior.py"


rule marginals:
    output:
        tests=f"{ANALYSES}/marginals/ks_tests.parquet",
        summary_md=f"{ANALYSES}/report/marginals_summary.md",
        summary_html=report(
            f"{ANALYSES}/report/marginals_summary.html",
            caption="../report/marginals_summary.rst",
            category="Analyses",
            subcategory="marginals",
            labels={"table": "Kolmogorov-Smirnov tests"},
        ),
        figure=report(
            f"{ANALYSES}/report/marginals.png",
            caption="../report/marginals.rst",
            category="Analyses",
            subcategory="marginals",
            labels={"figure": "marginals (Figure 9)"},
        ),
    log:
        f"{ANALYSES}/logs/marginals.log",
    benchmark:
        f"{ANALYSES}/benchmarks/marginals.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        settings=key_sorted(symbnn.analyses.plan.settings(config, "marginals")),
    message:
        "Layer-wise marginals before and after symmetry removal (paper appendix D.3), with Kolmogorov-Smirnov tests"
    script:
        "../workflow_scripts/marginals.py"


rule permutation_frequency:
    output:
        table=f"{RESULTS}/{{experiment}}/analyses/permutation_frequency.parquet",
        permutations=f"{RESULTS}/{{experiment}}/analyses/sorting_permutations.parquet",
        summary_md=f"{RESULTS}/{{experiment}}/report/permutation_frequency_summary.md",
        summary_html=report(
            f"{RESULTS}/{{experiment}}/report/permutation_frequency_summary.html",
            caption="../report/permutation_frequency_summary.rst",
            category="Analyses",
            subcategory="{experiment}",
            labels={"table": "permutation changes", "experiment": "{experiment}"},
        ),
        figure=report(
            f"{RESULTS}/{{experiment}}/report/permutation_frequency.png",
            caption="../report/permutation_frequency.rst",
            category="Analyses",
            subcategory="{experiment}",
            labels={"figure": "permutation frequency (Figure 4)", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/permutation_frequency.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/permutation_frequency.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
        gpu=lambda wc: compute(wc, "gpus", 0),
        slurm_partition=train_partition,
    params:
        settings=lambda wc: key_sorted(
            symbnn.analyses.plan.settings(config, "permutation_frequency")
        ),
        data=lambda wc: key_sorted(EXPERIMENTS[wc.experiment]["data"]),
        model=lambda wc: key_sorted(EXPERIMENTS[wc.experiment]["model"]),
        recipe=lambda wc: key_sorted(EXPERIMENTS[wc.experiment]["recipe"]),
        data_root=config.get("data_root", "data"),
        download=config.get("download", False),
        device=config.get("device", "auto"),
    message:
        "Permutation frequency during training of {wildcards.experiment} (paper section 5.2): Kendall's tau between consecutive sorting permutations"
    script:
        "../workflow_scripts/permutation_frequency.py"
