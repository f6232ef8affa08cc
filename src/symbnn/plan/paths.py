"""Where the workflow's files are, relative to the working folder (`config.results`)."""

from __future__ import annotations

from symbnn.analyses.plan import has_small_model
from symbnn.methods import registry
from symbnn.settings import Config

# the two stores of trained networks whose accuracies the acceptance rule reads (the
# `accuracies` checkpoint's `store` wildcard)
TARGET, POOL = "posterior/target", "modes/pool"


def experiment_folder(config: Config, experiment: str) -> str:
    return f"{config.results}/{experiment}"


def fit_file(config: Config, experiment: str, method: str, block: str) -> str:
    """The fits of one block of a method's modes."""
    return f"{experiment_folder(config, experiment)}/methods/{method}/fits/{block}.safetensors"


def variant_folder(config: Config, experiment: str, method: str, variant: str) -> str:
    return f"{experiment_folder(config, experiment)}/methods/{method}/{variant}"


def predict_inputs(config: Config, experiment: str, method: str, variant: str) -> dict[str, str]:
    """The variant's samples; for a linearised predictive also the pool, whose networks are
    the modes the samples are linearised at."""
    inputs = {"store": f"{variant_folder(config, experiment, method, variant)}/samples.zarr"}
    methods = config.experiments[experiment].methods
    if registry.predictive(method, methods) == "linearised":
        inputs["pool"] = f"{experiment_folder(config, experiment)}/modes/pool.zarr"
    return inputs


def variational_fit_files(config: Config, experiment: str) -> list[str]:
    """The VI fits of the variational barriers, one per seed."""
    variational = config.experiments[experiment].alignment.variational
    folder = f"{experiment_folder(config, experiment)}/alignment/variational"
    return [f"{folder}/{seed}.safetensors" for seed in variational.seeds()]


def reference_inputs(config: Config, experiment: str) -> dict[str, str]:
    """The pool where the HMC reference's chains start at the pool's modes (its accuracies
    come from the `accuracies` checkpoint, added by the rule file); none otherwise."""
    if config.experiments[experiment].reference.start != "pool":
        return {}
    return {"pool": f"{experiment_folder(config, experiment)}/modes/pool.zarr"}


def mode_count_inputs(config: Config, experiment: str) -> dict[str, str]:
    """The canonical target posterior and its convergence flags where the symmetry-counts
    table measures the D.1 mode count (small models: every pair of units of every network is
    compared; the rule file adds the target's accuracies and reads the flags as ancient);
    none for the others."""
    if not has_small_model(config, experiment):
        return {}
    folder = experiment_folder(config, experiment)
    return {
        "canonical": f"{folder}/canonical/target.zarr",
        "converged": f"{folder}/posterior/converged.parquet",
    }


def checkpoint_source(config: Config, experiment: str) -> list[str]:
    """The released files, as an input so that a changed bundle reruns the import; none when
    they are downloaded by the job."""
    checkpoints = config.experiments[experiment].posterior.checkpoints
    return [] if checkpoints.download else [checkpoints.path]
