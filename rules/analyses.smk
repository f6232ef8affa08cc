# The paper's further analyses: the toy posterior (Figure 1), the frequency of permutations
# during training (section 5.2, Figure 4), the layer-wise marginals (appendix D.3, Figure 9),
# the related work's symmetrised VI and variational alignment on a toy MLP task, and
# symmetrised VI by width and barriers over pairs of MLPs on the packaged digits. All but
# the permutation frequency and the marginals of an experiment's own target posterior stand
# apart from the experiments; the permutation frequency trains a few networks with an
# experiment's data, model and recipe (a ResNet-18 only where the experiment has GPUs, with
# its `compute` resources).


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
            category="7 Further analyses",
            subcategory="toy posterior",
            labels={"table": "networks kept and function check"},
        ),
        figure=report(
            f"{ANALYSES}/report/toy_posterior.png",
            caption="../report/toy_posterior.rst",
            category="7 Further analyses",
            subcategory="toy posterior",
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
        settings=analysis_params("toy"),
    message:
        "Toy posterior (paper Figure 1): training two-layer perceptrons on two Gaussian classes and removing their symmetries"
    script:
        "../workflow_scripts/toy_posterior.py"


rule marginals:
    output:
        tests=f"{ANALYSES}/marginals/ks_tests.parquet",
        # the networks before and after symmetry removal, for the figure (rule marginals_figure)
        stages=f"{ANALYSES}/marginals/stages.safetensors",
        summary_md=f"{ANALYSES}/report/marginals_summary.md",
        summary_html=report(
            f"{ANALYSES}/report/marginals_summary.html",
            caption="../report/marginals_summary.rst",
            category="7 Further analyses",
            subcategory="marginals",
            labels={"table": "Kolmogorov-Smirnov tests"},
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
        settings=analysis_params("marginals"),
    message:
        "Layer-wise marginals before and after symmetry removal (paper appendix D.3), with Kolmogorov-Smirnov tests"
    script:
        "../workflow_scripts/marginals.py"


rule marginals_figure:
    # a light rule of its own: a figure-only setting (plot_units) redraws, retraining nothing
    input:
        tests=f"{ANALYSES}/marginals/ks_tests.parquet",
        stages=f"{ANALYSES}/marginals/stages.safetensors",
    output:
        figure=report(
            f"{ANALYSES}/report/marginals.png",
            caption="../report/marginals.rst",
            category="7 Further analyses",
            subcategory="marginals",
            labels={"figure": "marginals (Figure 9)"},
        ),
    log:
        f"{ANALYSES}/logs/marginals_figure.log",
    benchmark:
        f"{ANALYSES}/benchmarks/marginals_figure.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        figure=analysis_params("marginals", figure=True),
    message:
        "Drawing the layer-wise marginals (paper Figure 9)"
    script:
        "../workflow_scripts/marginals_figure.py"


rule posterior_marginals:
    # the same check on an experiment's own target posterior (small models, and every imported
    # one: the released networks), stored and canonical
    input:
        store=f"{RESULTS}/{{experiment}}/posterior/target.zarr",
        canonical=f"{RESULTS}/{{experiment}}/canonical/target.zarr",
    output:
        tests=f"{RESULTS}/{{experiment}}/marginals/ks_tests.parquet",
        summary=f"{RESULTS}/{{experiment}}/report/posterior_marginals.md",
        summary_html=report(
            f"{RESULTS}/{{experiment}}/report/posterior_marginals.html",
            caption="../report/posterior_marginals_summary.rst",
            category="7 Further analyses",
            subcategory="{experiment}",
            labels={"table": "Kolmogorov-Smirnov tests", "experiment": "{experiment}"},
        ),
        figure=report(
            f"{RESULTS}/{{experiment}}/report/posterior_marginals.png",
            caption="../report/posterior_marginals.rst",
            category="7 Further analyses",
            subcategory="{experiment}",
            labels={"figure": "marginals (Figure 9)", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/posterior_marginals.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/posterior_marginals.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=store_runtime(30),
    message:
        "Weight marginals of the {wildcards.experiment} units before and after symmetry removal (paper appendix D.3, KS tests)"
    script:
        "../workflow_scripts/posterior_marginals.py"


rule permutation_frequency:
    output:
        table=f"{RESULTS}/{{experiment}}/analyses/permutation_frequency.parquet",
        permutations=f"{RESULTS}/{{experiment}}/analyses/sorting_permutations.parquet",
        summary_md=f"{RESULTS}/{{experiment}}/report/permutation_frequency_summary.md",
        summary_html=report(
            f"{RESULTS}/{{experiment}}/report/permutation_frequency_summary.html",
            caption="../report/permutation_frequency_summary.rst",
            category="7 Further analyses",
            subcategory="{experiment}",
            labels={"table": "permutation changes", "experiment": "{experiment}"},
        ),
        figure=report(
            f"{RESULTS}/{{experiment}}/report/permutation_frequency.png",
            caption="../report/permutation_frequency.rst",
            category="7 Further analyses",
            subcategory="{experiment}",
            labels={"figure": "permutation frequency (Figure 4)", "experiment": "{experiment}"},
        ),
    log:
        f"{RESULTS}/{{experiment}}/logs/permutation_frequency.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/permutation_frequency.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: permutation_frequency_resource("threads")
    resources:
        mem_mb=permutation_frequency_resource("mem_mb"),
        runtime=permutation_frequency_resource("runtime"),
        gpu=permutation_frequency_resource("gpu"),
        cpus_per_gpu=permutation_frequency_resource("cpus_per_gpu"),
        slurm_partition=train_partition,
    params:
        settings=analysis_params("permutation_frequency"),
        training=training_params,
        # runs that do not converge (as the target posterior's threshold says) are left out
        min_accuracy=section_params("posterior", "min_accuracy"),
    message:
        "Permutation frequency during training of {wildcards.experiment} (paper section 5.2): Kendall's tau between consecutive sorting permutations"
    script:
        "../workflow_scripts/permutation_frequency.py"


# the rule names are the config keys and name the results (-ise); the code they run says -ize
rule symmetrised_vi:
    output:
        runs=f"{ANALYSES}/symmetrised_vi/runs.parquet",
        table=f"{ANALYSES}/report/symmetrised_vi.md",
        html=report(
            f"{ANALYSES}/report/symmetrised_vi.html",
            caption="../report/symmetrised_vi.rst",
            category="8 Related work",
            labels={"table": "symmetrised VI"},
        ),
    log:
        f"{ANALYSES}/logs/symmetrised_vi.log",
    benchmark:
        f"{ANALYSES}/benchmarks/symmetrised_vi.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        settings=analysis_params("symmetrised_vi"),
    message:
        "Symmetrised vs mean-field variational posterior on the two-Gaussian MLP task"
    script:
        "../workflow_scripts/symmetrized_vi.py"


rule symmetrised_vi_widths:
    output:
        runs=f"{ANALYSES}/symmetrised_vi_widths/runs.parquet",
        table=f"{ANALYSES}/report/symmetrised_vi_widths.md",
        gaps=f"{ANALYSES}/report/symmetrised_vi_widths_gaps.md",
        html=report(
            f"{ANALYSES}/report/symmetrised_vi_widths.html",
            caption="../report/symmetrised_vi_widths.rst",
            category="8 Related work",
            labels={"table": "symmetrised VI by width"},
        ),
        gaps_html=report(
            f"{ANALYSES}/report/symmetrised_vi_widths_gaps.html",
            caption="../report/symmetrised_vi_widths_gaps.rst",
            category="8 Related work",
            labels={"table": "symmetrised minus mean-field VI by width"},
        ),
    log:
        f"{ANALYSES}/logs/symmetrised_vi_widths.log",
    benchmark:
        f"{ANALYSES}/benchmarks/symmetrised_vi_widths.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        settings=analysis_params("symmetrised_vi_widths"),
    message:
        "Mean-field vs symmetrised VI on MLPs of several widths, against a deep ensemble"
    script:
        "../workflow_scripts/symmetrized_vi_widths.py"


rule variational_alignment:
    output:
        curves=f"{ANALYSES}/symmetrised_vi/alignment_curves.parquet",
        table=f"{ANALYSES}/report/variational_alignment.md",
        html=report(
            f"{ANALYSES}/report/variational_alignment.html",
            caption="../report/variational_alignment.rst",
            category="8 Related work",
            labels={"table": "VI loss barrier"},
        ),
        figure=report(
            f"{ANALYSES}/report/variational_alignment.png",
            caption="../report/variational_alignment.rst",
            category="8 Related work",
            labels={"figure": "VI interpolation"},
        ),
    log:
        f"{ANALYSES}/logs/variational_alignment.log",
    benchmark:
        f"{ANALYSES}/benchmarks/variational_alignment.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        settings=analysis_params("symmetrised_vi"),
    message:
        "Aligning two mean-field variational posteriors of the two-Gaussian MLP task"
    script:
        "../workflow_scripts/variational_alignment.py"


rule barrier_statistics:
    output:
        pairs=f"{ANALYSES}/barrier_statistics/pairs.parquet",
        table=f"{ANALYSES}/report/barrier_statistics.md",
        html=report(
            f"{ANALYSES}/report/barrier_statistics.html",
            caption="../report/barrier_statistics.rst",
            category="7 Further analyses",
            subcategory="barriers over pairs",
            labels={"table": "loss and accuracy barriers over pairs"},
        ),
    log:
        f"{ANALYSES}/logs/barrier_statistics.log",
    benchmark:
        f"{ANALYSES}/benchmarks/barrier_statistics.tsv"
    conda:
        "../envs/symbnn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        settings=analysis_params("barrier_statistics"),
    message:
        "Loss and accuracy barriers over pairs of SGD and mean-field VI MLPs, before and after alignment"
    script:
        "../workflow_scripts/barrier_statistics.py"
