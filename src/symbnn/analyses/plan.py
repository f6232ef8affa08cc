"""Which analyses a workflow run builds (rules/analyses.smk calls these, so the rule file holds
rules only and the choices are testable without Snakemake)."""

from __future__ import annotations

import math

from symbnn.settings import Config
from symbnn.settings.analyses import SMALL_MODELS


def analyses_folder(config: Config) -> str:
    """Where the experiment-independent analyses write (beside the experiments' folders)."""
    return f"{config.results}/analyses"


def has_small_model(config: Config, experiment: str) -> bool:
    return config.experiments[experiment].model.name in SMALL_MODELS


def permutation_frequency_resources(config: Config, experiment: str) -> dict[str, int]:
    """threads, mem_mb, runtime (minutes), gpu and cpus_per_gpu of an experiment's
    permutation-frequency job. A small model's runs take minutes on one core; a large model's
    job trains `runs` networks as the experiment's training jobs do (its `compute` section:
    `runtime_min` per shard of `posterior.shard_size` networks, scaled by the analysis's
    epochs). Seeds retried after a run that does not converge are not budgeted."""
    settings = config.experiments[experiment]
    compute = settings.compute
    if has_small_model(config, experiment):
        threads, mem_mb, runtime = 1, 2000, 60
    else:
        frequency = config.analyses.permutation_frequency
        epochs = frequency.epochs or settings.recipe.epochs
        networks = frequency.runs * epochs / settings.recipe.epochs
        threads, mem_mb = compute.threads, compute.mem_mb
        runtime = math.ceil(compute.runtime_min * networks / settings.posterior.shard_size)
    return {
        "threads": threads,
        "mem_mb": mem_mb,
        "runtime": runtime,
        "gpu": compute.gpus,
        "cpus_per_gpu": max(1, threads // compute.gpus) if compute.gpus else 0,
    }


def posterior_marginals_experiments(config: Config) -> list[str]:
    """Experiments of `run` whose target posterior gets the weight-marginal tests of appendix D.3
    (Figure 9): the small models while `analyses.marginals` is on, and every imported posterior
    (the released networks)."""
    small = config.analyses.enabled("marginals")
    return [
        name
        for name in config.run
        if (small and has_small_model(config, name))
        or config.experiments[name].posterior.checkpoints is not None
    ]


def targets(config: Config) -> list[str]:
    """The files `rule all` asks for on behalf of the analyses."""
    folder, enabled = analyses_folder(config), config.analyses.enabled
    out = []
    if enabled("toy"):
        out += [f"{folder}/report/toy_posterior.png", f"{folder}/report/toy_summary.md"]
    if enabled("marginals"):
        out += [f"{folder}/report/marginals.png", f"{folder}/report/marginals_summary.md"]
    if enabled("symmetrised_vi"):
        out += [
            f"{folder}/report/symmetrised_vi.md",
            f"{folder}/report/variational_alignment.png",
        ]
    if enabled("symmetrised_vi_widths"):
        out.append(f"{folder}/report/symmetrised_vi_widths.md")
    if enabled("barrier_statistics"):
        out.append(f"{folder}/report/barrier_statistics.md")
    for experiment in config.analyses.permutation_frequency_experiments(
        config.run, config.experiments
    ):
        out += [
            f"{config.results}/{experiment}/report/permutation_frequency.png",
            f"{config.results}/{experiment}/report/permutation_frequency_summary.md",
        ]
    for experiment in posterior_marginals_experiments(config):
        out += [
            f"{config.results}/{experiment}/report/posterior_marginals.png",
            f"{config.results}/{experiment}/report/posterior_marginals.md",
        ]
    return out
