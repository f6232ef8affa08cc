"""Which jobs a run has: the targets of `rule all`, each experiment's shards, methods and
fit blocks, and the wildcard patterns that send an experiment to training or to the import of
released networks."""

from __future__ import annotations

import re

from symbnn.methods import registry
from symbnn.plan.paths import POOL, TARGET, experiment_folder, fit_file
from symbnn.reference import plan as reference_plan
from symbnn.settings import Config, Posterior
from symbnn.settings.workflow import EXPERIMENT_NAME


def shard_ids(config: Config, experiment: str) -> list[str]:
    return config.experiments[experiment].posterior.shard_ids()


def pool_posterior(config: Config, experiment: str) -> Posterior:
    """The pool as a posterior section, so that it shards like the target posterior."""
    settings = config.experiments[experiment]
    methods, posterior = settings.methods, settings.posterior
    return posterior.replace(
        n_samples=methods.pool,
        shard_size=min(methods.pool, posterior.shard_size),
        first_seed=methods.first_seed,
    )


def method_pattern(config: Config) -> str:
    """The `method` wildcard: every method some experiment configures."""
    sections = (e.methods for e in config.experiments.values() if e.methods is not None)
    return "|".join(registry.method_names(sections))


def method_variants(config: Config, experiment: str) -> list[tuple[str, str]]:
    """(method, variant) pairs an experiment's `methods` section turns on."""
    methods = config.experiments[experiment].methods
    if methods is None:
        return []
    return [
        (m, v) for m in registry.configured_methods(methods) for v in registry.variants(m, methods)
    ]


def method_labels(config: Config, experiment: str) -> list[str]:
    """Table 1's row label of each configured method, in row order."""
    return registry.labels(config.experiments[experiment].methods)


def mode_blocks(config: Config, experiment: str, method: str) -> list[list[int]]:
    """The modes of each fit job of the method: all in one block where it fits them in one
    batched run (`methods.fit_block` splits it), else one job per mode."""
    settings = config.experiments[experiment]
    batched = registry.batched_fits(settings)
    return registry.mode_blocks(method, settings.methods, batched)


def fit_blocks(config: Config, experiment: str, method: str) -> list[str]:
    """The `block` wildcard of each fit job of the method."""
    return [f"{b:03d}" for b in range(len(mode_blocks(config, experiment, method)))]


def variant_files(config: Config, experiment: str, template: str) -> list[str]:
    """`template` (e.g. "methods/{method}/{variant}/samples.zarr", under the experiment's
    folder) for every method's variant."""
    folder = experiment_folder(config, experiment)
    return [
        f"{folder}/{template.format(method=m, variant=v)}"
        for m, v in method_variants(config, experiment)
    ]


def target_shards(config: Config, experiment: str) -> list[str]:
    """The shard stores gathered into the target posterior."""
    folder = experiment_folder(config, experiment)
    return [f"{folder}/posterior/shards/{s}.zarr" for s in shard_ids(config, experiment)]


def pool_shards(config: Config, experiment: str) -> list[str]:
    """The shard stores gathered into the methods' pool."""
    folder = experiment_folder(config, experiment)
    return [
        f"{folder}/modes/shards/{s}.zarr" for s in pool_posterior(config, experiment).shard_ids()
    ]


def fit_files(config: Config, experiment: str, method: str) -> list[str]:
    """Every fit block of a method, which its variants' samples are drawn from."""
    return [
        fit_file(config, experiment, method, block)
        for block in fit_blocks(config, experiment, method)
    ]


def reference_mmd_summaries(config: Config, experiment: str) -> list[str]:
    """The MMD summaries against the HMC reference: the target's and every variant's."""
    targets = reference_plan.experiment_targets(
        config, experiment, method_variants(config, experiment)
    )
    return [p for p in targets if p.endswith("summary.parquet") and "/reference/mmd/" in p]


def all_targets(config: Config) -> list[str]:
    """What `rule all` asks for of every experiment of `run` (the analyses, alignment and
    reference add their own)."""
    targets = []
    for experiment in config.run:
        folder = experiment_folder(config, experiment)
        targets += [
            f"{folder}/report/posterior_training.md",
            f"{folder}/report/posterior_store.md",
            f"{folder}/canonical/target.zarr",
            f"{folder}/report/minmass.png",
            f"{folder}/report/minmass_summary.md",
            f"{folder}/report/collapse.png",
            f"{folder}/report/symmetry_counts.md",
            # always on disk, so that the planning applies the acceptance rule to them (a
            # job whose checkpoint input is missing would not be checked at all)
            f"{folder}/{TARGET}_accuracies.parquet",
        ]
        settings = config.experiments[experiment]
        posterior = settings.posterior
        if posterior.plateau_seeds is not None and posterior.source == "train":
            targets.append(f"{folder}/report/plateau.md")
        if settings.mmd.de_members is not None:
            targets.append(f"{folder}/report/mmd_deep_ensembles.md")
        if method_variants(config, experiment):
            targets.append(f"{folder}/report/table1.md")
            targets.append(f"{folder}/{POOL}_accuracies.parquet")
    return targets


def alignment_targets(config: Config) -> list[str]:
    """Barrier tables and plots for every experiment with two target networks or more, and
    for its pairs of VI posteriors where `alignment.variational` is set."""
    targets = []
    for experiment in config.run:
        settings, folder = config.experiments[experiment], experiment_folder(config, experiment)
        if settings.posterior.n_samples >= 2:
            targets += [
                f"{folder}/report/alignment_barrier.md",
                f"{folder}/report/alignment_interpolation.png",
            ]
        if settings.alignment.variational is not None:
            targets += [
                f"{folder}/report/variational_barriers.md",
                f"{folder}/report/variational_interpolation.png",
            ]
    return targets


# ---- released checkpoints (rules/checkpoints.smk): which experiments import, not train


def imported_experiments(config: Config, for_pool: bool = False) -> list[str]:
    """Names of the experiments whose target (or pool) comes from released networks."""
    names = []
    for name, experiment in config.experiments.items():
        checkpoints = experiment.posterior.checkpoints
        if checkpoints is None:
            continue
        if for_pool and not (checkpoints.pool and experiment.methods is not None):
            continue
        names.append(name)
    return names


def names_pattern(names: list[str]) -> str:
    """A wildcard pattern matching exactly `names` (nothing when there are none)."""
    return "|".join(re.escape(name) for name in names) or "(?!)"


def imported_pattern(config: Config, for_pool: bool = False) -> str:
    """A wildcard pattern for the experiments whose target (or pool) is imported."""
    return names_pattern(imported_experiments(config, for_pool))


def trained_pattern(config: Config, for_pool: bool = False) -> str:
    """A wildcard pattern for the experiments whose target (or pool) is trained: every name
    but the imported ones (each followed by '/' in the paths these rules write)."""
    imported = imported_experiments(config, for_pool)
    if not imported:
        return EXPERIMENT_NAME
    return f"(?!(?:{names_pattern(imported)})/){EXPERIMENT_NAME}"
