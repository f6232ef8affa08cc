"""Each rule's params: exactly what changes a job's result, so that Snakemake reruns a job
when (and only when) one of them changes.

A setting's params are its resolved value as a plain dict in the settings' field order (so
reordering config.yaml changes nothing). The environment (data_root, download, device) and
the resources (`compute`) are never params."""

from __future__ import annotations

import dataclasses
from typing import Any

from symbnn import plateau
from symbnn.methods import registry
from symbnn.plan.jobs import method_variants, mode_blocks, pool_posterior
from symbnn.plan.kept import Accuracies, kept_mode_rows, retry_threshold
from symbnn.plan.measured import data_fingerprint
from symbnn.settings import Config


def training_params(config: Config, experiment: str) -> dict[str, Any]:
    """What determines the trained weights: data, model and recipe; and the content of the
    datasets of the user's own, if any (a changed dataset reruns the trainings)."""
    settings = config.experiments[experiment]
    params = {
        "data": settings.data.to_dict(),
        "model": settings.model.to_dict(),
        "recipe": settings.recipe.to_dict(),
    }
    return {**params, **data_fingerprint(config, experiment)}


def plateau_training_params(config: Config, experiment: str) -> dict[str, Any]:
    """`training_params` with the recipe run for twice the epochs (the plateau check)."""
    params = training_params(config, experiment)
    recipe = config.experiments[experiment].recipe.stretched(plateau.FACTOR)
    return {**params, "recipe": recipe.to_dict()}


def section_params(config: Config, experiment: str, *path: str) -> Any:
    """The experiment's settings section at `path` (e.g. "symmetry"), or one of its keys
    (e.g. "mmd", "pvalue")."""
    value = config.experiments[experiment]
    for name in path:
        value = getattr(value, name)
    return value.to_dict() if hasattr(value, "to_dict") else value


def target_shard_seeds(config: Config, experiment: str, shard: str) -> list[int]:
    """The seeds a shard of the target posterior trains."""
    return config.experiments[experiment].posterior.shard_seeds(shard)


def pool_shard_seeds(config: Config, experiment: str, shard: str) -> list[int]:
    """The seeds a shard of the methods' pool trains."""
    return pool_posterior(config, experiment).shard_seeds(shard)


def plateau_seeds(config: Config, experiment: str) -> list[int]:
    """The target seeds the plateau check trains again."""
    posterior = config.experiments[experiment].posterior
    return plateau.plateau_seeds(posterior.first_seed, posterior.plateau_seeds)


def acceptance_params(config: Config, experiment: str) -> dict[str, Any]:
    """The acceptance rule: which trained networks are kept."""
    posterior = config.experiments[experiment].posterior
    return {
        "min_accuracy": posterior.min_accuracy,
        "max_below_median": posterior.max_below_median,
    }


def fit_params(
    config: Config, experiment: str, method: str, block: str, accuracies: Accuracies
) -> dict[str, Any]:
    """What one block of a method's fits depends on besides the pool: the method's fit
    settings, the modes and the pool rows they are (`accuracies`: the pool's), the seed; the
    sample counts when the method draws its samples while fitting; the retries and the
    threshold when it trains its own network."""
    methods = config.experiments[experiment].methods
    described = registry.descriptor(method, methods)
    blocks = mode_blocks(config, experiment, method)
    params = {
        **registry.code_params(method, methods),
        "settings": registry.fit_settings(method, methods),
        "modes": blocks[int(block)],
        "seed": methods.seed,
    }
    if described.samples_at_fit:
        params["counts"] = registry.fit_counts(method, methods)
    # the pool networks the modes are (an acceptance rule keeping them refits nothing)
    params["rows"] = kept_mode_rows(config, experiment, accuracies, params["modes"])
    if described.trains_from_scratch:
        # the network must pass the pool's acceptance threshold within these retries
        params["retries"] = methods.retries
        params["threshold"] = retry_threshold(config, experiment, method, block, accuracies)
    return params


def sample_params(config: Config, experiment: str, method: str, variant: str) -> dict[str, Any]:
    """What a variant's samples depend on besides its fits: every setting of the method but
    the prediction-only ones (the fits carry the others' effect), the sample counts and the
    seed."""
    methods = config.experiments[experiment].methods
    return {
        **registry.code_params(method, methods),
        "settings": registry.sample_settings(method, methods),
        "plan": [dataclasses.asdict(d) for d in registry.sample_plan(method, variant, methods)],
        "seed": methods.seed,
    }


def predictive(config: Config, experiment: str, method: str) -> str:
    """How the method's samples predict (e.g. "linearised")."""
    return registry.predictive(method, config.experiments[experiment].methods)


def reference_variants(config: Config, experiment: str) -> list[list[str]]:
    """The (method, variant) pairs compared with the HMC reference."""
    return [list(pair) for pair in method_variants(config, experiment)]


def alignment_params(config: Config, experiment: str) -> dict[str, Any]:
    """What the barriers along the paths depend on (the VI fits' settings reach the
    variational barriers through their fit files)."""
    settings = config.experiments[experiment].alignment.to_dict()
    return {k: v for k, v in settings.items() if k != "variational"}


def variational_samples(config: Config, experiment: str) -> int:
    return config.experiments[experiment].alignment.variational.samples


def variational_fit_params(config: Config, experiment: str) -> dict[str, Any]:
    """What one VI fit depends on besides the experiment's data, model and recipe."""
    settings = config.experiments[experiment]
    variational = settings.alignment.variational
    return {
        "bnn": variational.bnn.to_dict(),
        "min_accuracy": settings.posterior.min_accuracy,
        "retries": variational.retries,
    }


def import_params(config: Config, experiment: str, pool: bool) -> dict[str, Any]:
    """What an imported store depends on: the release, its range, the test split measured."""
    settings = config.experiments[experiment]
    count = settings.posterior.n_samples
    offset = 0
    if pool:
        offset, count = count, settings.methods.pool
    return {
        "checkpoints": settings.posterior.checkpoints.to_dict(),
        "offset": offset,
        "count": count,
        "data": settings.data.to_dict(),
        **data_fingerprint(config, experiment),
    }


def analysis_params(config: Config, name: str, figure: bool = False) -> dict[str, Any]:
    """Params of an analysis: its resolved settings (the rule runs only when it is on) but
    those only its figure reads (its section's FIGURE_KEYS), or with figure=True those only:
    the params of the rule drawing its figure."""
    section = getattr(config.analyses, name)
    if section is False:
        return {}
    drawn = getattr(type(section), "FIGURE_KEYS", ())
    return {k: v for k, v in section.to_dict().items() if (k in drawn) == figure}
