"""Which analyses a workflow run builds (rules/analyses.smk calls these, so the rule file holds
rules only and the choices are testable without Snakemake)."""

from __future__ import annotations

from symbnn.settings import Config

# architectures small enough to retrain a few times with snapshots (ResNet-18 is a cluster job)
PERMUTATION_FREQUENCY_MODELS = ("optunet", "mlp")


def analyses_folder(config: Config) -> str:
    """Where the experiment-independent analyses write (beside the experiments' folders)."""
    return f"{config.results}/analyses"


def permutation_frequency_experiments(config: Config) -> list[str]:
    if not config.analyses.enabled("permutation_frequency"):
        return []
    return [
        name
        for name in config.run
        if config.experiments[name].model.name in PERMUTATION_FREQUENCY_MODELS
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
    for experiment in permutation_frequency_experiments(config):
        out += [
            f"{config.results}/{experiment}/report/permutation_frequency.png",
            f"{config.results}/{experiment}/report/permutation_frequency_summary.md",
        ]
    return out
