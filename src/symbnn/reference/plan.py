"""Which reference outputs a workflow run builds (rules/reference.smk calls these; planning
imports no torch). An experiment of `run` with a `reference` section gets its reference from
the target rule `reference_all` (`make run-hmc`); with `enabled: true`, from every run."""

from __future__ import annotations

from symbnn.settings import Config, ConfigError


def reference_experiments(config: Config, enabled_only: bool) -> list[str]:
    """Experiments of `run` with a reference section (only the enabled ones if asked)."""
    names = []
    for name in config.run:
        reference = config.experiments[name].reference
        if reference is not None and (reference.enabled or not enabled_only):
            names.append(name)
    return names


def experiment_targets(config: Config, experiment: str, variants: list[tuple[str, str]]):
    """The reference's outputs of one experiment: the store, its diagnostics, and the MMD of
    the paper's target and of every method's variant (`variants`: (method, variant) pairs)
    against it, their predictive agreement and total variation, and the findings decided on
    them."""
    root = f"{config.results}/{experiment}"
    targets = [
        f"{root}/reference/hmc.zarr",
        f"{root}/reference/chains.parquet",
        f"{root}/reference/diagnostics.parquet",
        f"{root}/report/reference_diagnostics.md",
        f"{root}/reference/mmd/target/summary.parquet",
    ]
    for method, variant in variants:
        targets.append(f"{root}/reference/mmd/{method}/{variant}/summary.parquet")
    targets += [
        f"{root}/report/reference_mmd.md",
        f"{root}/report/reference_predictive.md",
        f"{root}/report/reference_metrics.md",
        f"{root}/report/reference_findings.md",
    ]
    return targets


def targets(config: Config, variants_of, enabled_only: bool) -> list[str]:
    """Every reference output of the run (`variants_of(experiment)`: its (method, variant)
    pairs)."""
    found = []
    for name in reference_experiments(config, enabled_only):
        experiment = config.experiments[name]
        if experiment.reference.start == "pool" and experiment.methods is None:
            raise ConfigError(
                f"experiments.{name}.reference.start: pool starts the chains at the methods' "
                "pool, but the experiment has no methods section (add one, or set start: prior)"
            )
        found += experiment_targets(config, name, variants_of(name))
    return found


def start_rows(config: Config, experiment: str) -> list[int]:
    """The pool modes the chains start from (mode m: the pool's m-th kept network)."""
    reference = config.experiments[experiment].reference
    if reference is None or reference.start != "pool":
        return []
    return list(range(reference.modes))
