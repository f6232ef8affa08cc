"""Loading and checking `config.yaml`, and the layout it implies (shards and their seeds).

The Snakefile validates with `snakemake.utils.validate` against the same schema; this module
serves the CLI and the library, and adds the checks a JSON schema cannot express.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA_PATH = Path(str(resources.files("symbnn") / "config.schema.yaml"))


class ConfigError(ValueError):
    """A configuration value is missing or wrong; the message names the key."""


def _key_path(path) -> str:
    return ".".join(str(part) for part in path) or "<top level>"


def load_schema() -> dict[str, Any]:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def validate_config(config: dict[str, Any], source: str = "config") -> dict[str, Any]:
    """Validate against the schema and the cross-key rules; raise ConfigError naming the key."""
    validator = jsonschema.Draft202012Validator(load_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        error = jsonschema.exceptions.best_match(errors)
        raise ConfigError(f"{source}: {_key_path(error.absolute_path)}: {error.message}")
    check_semantics(config, source)
    return config


def check_semantics(config: dict[str, Any], source: str = "config") -> None:
    """Rules across keys: `run` names defined experiments, shards fit the posterior."""
    experiments = config["experiments"]
    for name in config["run"]:
        if name not in experiments:
            raise ConfigError(
                f"{source}: run: experiment {name!r} is not defined under experiments "
                f"(defined: {', '.join(experiments)})"
            )
    for name, experiment in experiments.items():
        posterior = experiment["posterior"]
        if posterior["shard_size"] > posterior["n_samples"]:
            raise ConfigError(
                f"{source}: experiments.{name}.posterior.shard_size ({posterior['shard_size']}) "
                f"exceeds n_samples ({posterior['n_samples']})"
            )
        members = experiment.get("mmd", {}).get("de_members")
        if members is not None and members > posterior["n_samples"] - 2:
            raise ConfigError(
                f"{source}: experiments.{name}.mmd.de_members ({members}) must leave at least 2 of "
                f"the {posterior['n_samples']} target networks"
            )
        check_methods(experiment, f"{source}: experiments.{name}")
        milestones = experiment["recipe"].get("milestones", [])
        if sorted(milestones) != list(milestones):
            raise ConfigError(
                f"{source}: experiments.{name}.recipe.milestones must be increasing: {milestones}"
            )


def check_methods(experiment: dict[str, Any], where: str) -> None:
    """The pool must be large enough for the modes and the Deep Ensemble, its seeds disjoint
    from the target's, and every variant needs at least one sample per mode."""
    methods = experiment.get("methods")
    if methods is None:
        return
    posterior = experiment["posterior"]
    target = range(
        posterior.get("first_seed", 0), posterior.get("first_seed", 0) + posterior["n_samples"]
    )
    pool_first = methods.get("first_seed", 1_000_000)
    pool = range(pool_first, pool_first + methods["pool"])
    if pool.start < target.stop and target.start < pool.stop:
        raise ConfigError(
            f"{where}.methods.first_seed: the pool's seeds {pool.start}..{pool.stop - 1} "
            f"overlap the target posterior's {target.start}..{target.stop - 1}"
        )
    if methods["modes"] > methods["pool"]:
        raise ConfigError(
            f"{where}.methods.modes ({methods['modes']}) exceeds methods.pool ({methods['pool']})"
        )
    if methods["n_samples"] < methods["modes"]:
        raise ConfigError(
            f"{where}.methods.n_samples ({methods['n_samples']}) is below methods.modes "
            f"({methods['modes']}): every mode needs a sample"
        )
    if "de" in methods and methods["n_samples"] > methods["pool"]:
        raise ConfigError(
            f"{where}.methods.n_samples ({methods['n_samples']}) exceeds methods.pool "
            f"({methods['pool']}): Deep Ensembles take one pool network per sample"
        )


def load_config(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return validate_config(config, str(path))


def shard_ids(posterior: dict[str, Any]) -> list[str]:
    """Zero-padded shard names: 000, 001, ..."""
    n, size = posterior["n_samples"], posterior["shard_size"]
    return [f"{i:03d}" for i in range(-(-n // size))]


def shard_seeds(posterior: dict[str, Any], shard: str | int) -> list[int]:
    """The seeds shard ``shard`` trains: a contiguous block, the last one possibly shorter."""
    index = int(shard)
    n, size = posterior["n_samples"], posterior["shard_size"]
    if not 0 <= index < -(-n // size):
        raise ConfigError(f"shard {shard!r} is out of range for n_samples={n}, shard_size={size}")
    first = posterior.get("first_seed", 0)
    return list(range(first + index * size, first + min(n, (index + 1) * size)))
