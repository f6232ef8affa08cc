"""Which analyses a workflow run builds, from config.yaml (rules/analyses.smk calls these, so the
rule file holds rules only and the choices are testable without Snakemake)."""

from __future__ import annotations

from typing import Any

ANALYSES = ("toy", "permutation_frequency", "marginals")
# architectures small enough to retrain a few times with snapshots (ResNet-18 is a cluster job)
PERMUTATION_FREQUENCY_MODELS = ("optunet", "mlp")


def analyses_folder(config: dict[str, Any]) -> str:
    """Where the experiment-independent analyses write (beside the experiments' folders)."""
    results = config.get("results", "results")
    if "analyses" in config["experiments"]:
        raise ValueError(
            f"config.yaml: experiments: the name 'analyses' is taken by the analyses' "
            f"output folder {results}/analyses; rename the experiment"
        )
    return f"{results}/analyses"


def settings(config: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The `analyses.<name>` block ({} when absent: the library defaults); None when it is set
    to false (the analysis is skipped)."""
    if name not in ANALYSES:
        raise ValueError(f"unknown analysis {name!r} (known: {', '.join(ANALYSES)})")
    section = (config.get("analyses") or {}).get(name, {})
    return None if section is False else dict(section)


def permutation_frequency_experiments(config: dict[str, Any]) -> list[str]:
    if settings(config, "permutation_frequency") is None:
        return []
    return [
        e
        for e in config["run"]
        if config["experiments"][e]["model"]["name"] in PERMUTATION_FREQUENCY_MODELS
    ]


def targets(config: dict[str, Any]) -> list[str]:
    """The files `rule all` asks for on behalf of the analyses."""
    results, folder = config.get("results", "results"), analyses_folder(config)
    out = []
    if settings(config, "toy") is not None:
        out += [f"{folder}/report/toy_posterior.png", f"{folder}/report/toy_summary.md"]
    if settings(config, "marginals") is not None:
        out += [f"{folder}/report/marginals.png", f"{folder}/report/marginals_summary.md"]
    for experiment in permutation_frequency_experiments(config):
        out += [
            f"{results}/{experiment}/report/permutation_frequency.png",
            f"{results}/{experiment}/report/permutation_frequency_summary.md",
        ]
    return out
