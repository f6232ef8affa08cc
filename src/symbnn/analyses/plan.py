"""Which analyses a workflow run builds (rules/analyses.smk calls these, so the rule file holds
rules only and the choices are testable without Snakemake)."""

from __future__ import annotations

from symbnn.settings import Config

# architectures small enough to retrain a few times with snapshots, or to compare every pair
# of their units across all networks (ResNet-18 is a cluster job)
SMALL_MODELS = ("optunet", "mlp")


def analyses_folder(config: Config) -> str:
    """Where the experiment-independent analyses write (beside the experiments' folders)."""
    return f"{config.results}/analyses"


def has_small_model(config: Config, experiment: str) -> bool:
    return config.experiments[experiment].model.name in SMALL_MODELS


def permutation_frequency_experiments(config: Config) -> list[str]:
    if not config.analyses.enabled("permutation_frequency"):
        return []
    return [name for name in config.run if has_small_model(config, name)]


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
    for experiment in permutation_frequency_experiments(config):
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
