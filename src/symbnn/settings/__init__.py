"""The settings layer: one frozen dataclass per section of config.yaml, the only place that
holds a setting's default, bounds and cross-key checks.

    from symbnn.settings import load_config
    config = load_config("config.yaml")
    config.experiments["default"].recipe.lr

Library functions take these sections; rules pass their resolved values as params
(`Section.to_dict`), and the command line takes its flags' defaults from them.
"""

from symbnn.settings.analyses import (
    Analyses,
    BarrierStatistics,
    Marginals,
    PermutationFrequency,
    SymmetrizedVi,
    SymmetrizedViWidths,
    Toy,
)
from symbnn.settings.base import ConfigError, Section
from symbnn.settings.hmc import Reference
from symbnn.settings.load import config_from_mapping, load_config
from symbnn.settings.methods import Bnn, DeepEnsembles, Dropout, Laplace, Methods, Sghmc, Swag
from symbnn.settings.stages import (
    Alignment,
    Collapse,
    Metrics,
    Mmd,
    MmdTest,
    SymmetryRemoval,
    VariationalPairs,
)
from symbnn.settings.training import (
    Compute,
    Data,
    ImportedModel,
    MlpModel,
    Model,
    OodOptions,
    OptunetModel,
    Posterior,
    Recipe,
    Resnet18Model,
)
from symbnn.settings.workflow import Config, Experiment, Slurm

__all__ = [
    "Alignment",
    "Analyses",
    "Bnn",
    "Collapse",
    "Compute",
    "Config",
    "ConfigError",
    "Data",
    "DeepEnsembles",
    "Dropout",
    "Experiment",
    "Laplace",
    "Marginals",
    "Methods",
    "Metrics",
    "ImportedModel",
    "MlpModel",
    "Mmd",
    "MmdTest",
    "Model",
    "OodOptions",
    "OptunetModel",
    "PermutationFrequency",
    "Posterior",
    "Recipe",
    "Reference",
    "Resnet18Model",
    "Section",
    "Sghmc",
    "Slurm",
    "Swag",
    "SymmetrizedVi",
    "SymmetrizedViWidths",
    "BarrierStatistics",
    "SymmetryRemoval",
    "VariationalPairs",
    "Toy",
    "config_from_mapping",
    "load_config",
]
