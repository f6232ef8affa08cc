"""Settings of the paper's further analyses (`analyses:` in config.yaml): each runs with these
defaults unless set to `false`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from symbnn.settings.base import (
    MAX_BATCH,
    MAX_DRAWS,
    MAX_EPOCHS,
    MAX_NETWORKS,
    MAX_POINTS,
    MAX_SEED,
    MAX_WIDTH,
    ConfigError,
    Section,
    setting,
)
from symbnn.settings.training import Recipe

# architectures small enough to retrain a few times with snapshots, or to compare every pair
# of their units across all networks (ResNet-18 is a cluster job)
SMALL_MODELS = ("optunet", "mlp")

# architectures whose permutation frequency (Figure 4) is measured only where the experiment
# has GPUs: each run is one of the experiment's training jobs
GPU_FREQUENCY_MODELS = ("resnet18",)


@dataclasses.dataclass(frozen=True)
class Toy(Section):
    DOC = "toy posterior of Figure 1 (appendix A): 2-2-1 ReLU perceptrons on two Gaussian classes"
    n_networks: int = setting(10_000, "networks trained", ge=1, le=1_000_000)
    first_seed: int = setting(0, "seed of the first network", ge=0, le=MAX_SEED)
    n_per_class: int = setting(200, "training points per class", ge=1, le=10_000_000)
    class_means: tuple[tuple[float, float], tuple[float, float]] = setting(
        ((-2.0, -2.0), (2.0, 2.0)), "means of the two classes (not legible in the paper)"
    )
    data_seed: int = setting(0, "seed of the data draw", ge=0, le=MAX_SEED)
    epochs: int = setting(10, "SGD epochs", ge=1, le=MAX_EPOCHS)
    batch_size: int = setting(10, "points per SGD step", ge=1, le=MAX_BATCH)
    lr: float = setting(2.0, "SGD learning rate", gt=0)
    max_loss: float = setting(0.1, "networks with a larger final training loss are outliers", gt=0)
    norm: float = setting(3.0, "norm of every hidden neuron's incoming weights after scaling", gt=0)
    check_inputs: int = setting(256, "random inputs of the function check", ge=1, le=1_000_000)
    tolerance: float = setting(
        1e-5, "largest relative change of the function a transform may make", gt=0
    )

    def check(self, where: str) -> None:
        if self.class_means[0] == self.class_means[1]:
            raise ConfigError(f"{where}.class_means: the two means must differ")


@dataclasses.dataclass(frozen=True)
class PermutationFrequency(Section):
    DOC = (
        "Kendall's tau between consecutive sorting permutations during training (section 5.2), "
        "for every OptuNet/MLP experiment of `run` and every ResNet-18 one with GPUs"
    )
    runs: int = setting(4, "training runs", ge=1, le=1000)
    first_seed: int = setting(0, "seed of the first run", ge=0, le=MAX_SEED)
    every_k_steps: int = setting(5, "SGD steps between snapshots", ge=1, le=1_000_000)
    epochs: int | None = setting(
        None, "replaces the recipe's epochs (its later milestones are dropped)", ge=1, le=MAX_EPOCHS
    )
    milestones: tuple[int, ...] | None = setting(
        None, "replaces the recipe's milestones", ge=1, increasing=True, le=MAX_EPOCHS
    )

    def recipe_for(self, recipe: Recipe, where: str = "PermutationFrequency") -> Recipe:
        """The experiment's ``recipe`` with this analysis's epochs and milestones (milestones
        past the last epoch are dropped when only the epochs are replaced); errors name
        ``where``, this section's config path."""
        changes: dict[str, Any] = {}
        if self.epochs is not None:
            changes["epochs"] = self.epochs
            changes["milestones"] = [m for m in recipe.milestones if m < self.epochs]
        if self.milestones is not None:
            changes["milestones"] = list(self.milestones)
        return Recipe.parse({**recipe.to_dict(), **changes}, where)


@dataclasses.dataclass(frozen=True)
class Marginals(Section):
    DOC = "layer-wise marginals and Kolmogorov-Smirnov tests (appendix D.3) on MLPs fitted to a packaged regression set"
    dataset: Literal["diabetes"] = setting("diabetes", "scikit-learn's regression set")
    hidden: tuple[int, ...] = setting((16, 16), "hidden widths", ge=2, min_items=1, le=MAX_WIDTH)
    n_networks: int = setting(256, "networks trained", ge=2, le=1_000_000)
    first_seed: int = setting(0, "seed of the first network", ge=0, le=MAX_SEED)
    epochs: int = setting(60, "SGD epochs", ge=1, le=MAX_EPOCHS)
    batch_size: int = setting(32, "points per SGD step", ge=1, le=MAX_BATCH)
    lr: float = setting(0.01, "SGD learning rate", gt=0)
    alpha: float = setting(0.05, "level at which the summary counts rejections", gt=0, lt=1)
    plot_units: int = setting(4, "units per layer in the figure", ge=1, le=1000)
    # read only when drawing the figure (rule marginals_figure): editing them redraws it
    FIGURE_KEYS = ("plot_units",)


@dataclasses.dataclass(frozen=True)
class SymmetrizedVi(Section):
    DOC = (
        "symmetrised vs mean-field VI on an MLP 2-H-2 fitted to two Gaussian classes, and two "
        "mean-field posteriors aligned modulo permutations"
    )
    hidden: int = setting(4, "hidden units (|G| = hidden!)", ge=1, le=7)
    n_train: int = setting(200, "training points", ge=2, le=10_000_000)
    n_test: int = setting(1000, "test points", ge=2, le=10_000_000)
    separation: float = setting(
        1.0, "class means at +-(separation, separation), unit variance", ge=0
    )
    data_seed: int = setting(0, "seed of the data draw", ge=0, le=MAX_SEED)
    prior_std: float = setting(1.0, "standard deviation of the Gaussian prior", gt=0)
    rho_init: float = setting(-3.0, "initial rho (sigma = log(1 + exp(rho)))")
    steps: int = setting(600, "full-batch Adam steps", ge=1, le=10_000_000)
    lr: float = setting(0.03, "Adam learning rate", gt=0)
    elbo_samples: int = setting(4, "reparameterised draws per step", ge=1, le=MAX_DRAWS)
    eval_samples: int = setting(
        256, "draws for the ELBO, accuracy and NLL estimates", ge=1, le=100_000
    )
    seeds: tuple[int, ...] = setting(
        (0, 1), "one fit per family and seed", ge=0, min_items=1, le=MAX_SEED
    )
    target_runs: int = setting(
        64, "independent SGD runs: the target posterior of the MMD", ge=2, le=MAX_NETWORKS
    )
    target_epochs: int = setting(30, "SGD epochs of the target runs", ge=1, le=MAX_EPOCHS)
    target_lr: float = setting(0.1, "SGD learning rate of the target runs", gt=0)
    target_batch_size: int = setting(
        10, "points per SGD step of the target runs", ge=1, le=MAX_BATCH
    )
    mmd_samples: int = setting(64, "draws of each family for the MMD", ge=2, le=100_000)
    max_enumerate: int = setting(
        5040, "largest |G| whose elements are enumerated (else Monte Carlo)", ge=1, le=1_000_000
    )
    mc_permutations: int = setting(
        64, "permutations of the Monte-Carlo estimate of log q_sym", ge=1, le=1_000_000
    )
    alignment_points: int = setting(
        11, "points on the path between two aligned posteriors", ge=2, le=MAX_POINTS
    )
    alignment_samples: int = setting(
        32, "common-noise draws per point of that path", ge=1, le=MAX_DRAWS
    )


@dataclasses.dataclass(frozen=True)
class SymmetrizedViWidths(Section):
    DOC = (
        "mean-field vs symmetrised VI on one-hidden-layer MLPs of several widths on the packaged "
        "digits (pooled images), against a deep-ensemble reference"
    )
    dataset: Literal["digits", "mnist"] = setting(
        "digits", "digits: the 5,000 packaged MNIST digits; mnist: MNIST under data_root"
    )
    image_size: Literal[7, 14, 28] = setting(7, "images average-pooled to this many pixels a side")
    widths: tuple[int, ...] = setting(
        (4, 8, 16, 32, 64),
        "hidden widths H (|G| = H!)",
        ge=2,
        min_items=1,
        increasing=True,
        le=MAX_WIDTH,
    )
    seeds: tuple[int, ...] = setting(
        (0, 1, 2),
        "one fit per family and seed (the seed sets the initial means)",
        ge=0,
        min_items=2,
        le=MAX_SEED,
    )
    prior_std: float = setting(1.0, "standard deviation of the Gaussian prior", gt=0)
    rho_init: float = setting(-5.0, "initial rho (sigma = log(1 + exp(rho)))")
    steps: int = setting(800, "Adam steps of each fit", ge=1, le=10_000_000)
    batch_size: int = setting(250, "images per step", ge=1, le=MAX_BATCH)
    lr: float = setting(0.01, "Adam learning rate", gt=0)
    elbo_samples: int = setting(2, "reparameterised draws per step", ge=1, le=MAX_DRAWS)
    eval_samples: int = setting(
        64, "draws for the ELBO, overlap, NLL, accuracy and ECE", ge=2, le=100_000
    )
    mmd_samples: int = setting(
        16, "draws of each fit for the MMDs (at most eval_samples)", ge=2, le=100_000
    )
    reference_runs: int = setting(
        16, "independent SGD runs: the deep-ensemble reference", ge=2, le=MAX_NETWORKS
    )
    reference_epochs: int = setting(10, "SGD epochs of the reference runs", ge=1, le=MAX_EPOCHS)
    reference_lr: float = setting(0.2, "SGD learning rate of the reference runs", gt=0)
    reference_batch_size: int = setting(
        64, "images per SGD step of the reference runs", ge=1, le=MAX_BATCH
    )

    def check(self, where: str) -> None:
        if self.mmd_samples > self.eval_samples:
            raise ConfigError(f"{where}.mmd_samples: at most eval_samples ({self.eval_samples})")


@dataclasses.dataclass(frozen=True)
class BarrierStatistics(Section):
    DOC = (
        "loss and accuracy barriers between pairs of MLPs on the packaged digits (SGD networks "
        "and mean-field VI posteriors), before and after alignment modulo permutations"
    )
    dataset: Literal["digits", "mnist"] = setting(
        "digits", "digits: the 5,000 packaged MNIST digits; mnist: MNIST under data_root"
    )
    hidden: tuple[int, ...] = setting((64,), "hidden widths", ge=1, min_items=1, le=MAX_WIDTH)
    pairs: int = setting(10, "independent pairs (two fresh seeds each)", ge=1, le=MAX_DRAWS)
    first_seed: int = setting(0, "seed of the first network", ge=0, le=MAX_SEED)
    epochs: int = setting(8, "training epochs (SGD and VI alike)", ge=1, le=MAX_EPOCHS)
    batch_size: int = setting(64, "images per step", ge=1, le=MAX_BATCH)
    lr: float = setting(0.05, "learning rate (constant)", gt=0)
    momentum: float = setting(0.9, "SGD momentum", ge=0, lt=1)
    elbo_samples: int = setting(
        1, "weight draws per ELBO estimate of the VI fits", ge=1, le=MAX_DRAWS
    )
    prior_sigma: float = setting(0.3, "standard deviation of the VI fits' Gaussian prior", gt=0)
    vi_lr: float = setting(0.01, "Adam learning rate of the VI fits", gt=0)
    rho_init: float = setting(-5.0, "initial rho of the VI fits (sigma = log(1 + exp(rho)))")
    samples: int = setting(8, "common-noise draws per point of a VI path", ge=1, le=MAX_DRAWS)
    points: int = setting(11, "points on each path, endpoints included", ge=3, le=MAX_POINTS)
    splits: tuple[Literal["train", "test"], ...] = setting(
        ("train", "test"), "splits the barriers are measured on", min_items=1
    )


@dataclasses.dataclass(frozen=True)
class Analyses(Section):
    DOC = "the paper's further analyses; `false` skips one, an absent key runs it with the defaults"
    toy: Toy | Literal[False] = setting(Toy(), "toy posterior (Figure 1)")
    permutation_frequency: PermutationFrequency | Literal[False] = setting(
        PermutationFrequency(), "permutation frequency (Figure 4)"
    )
    marginals: Marginals | Literal[False] = setting(Marginals(), "layer-wise marginals (Figure 9)")
    # the keys keep their -ise spelling (results, logs and DVC caches are named after them);
    # the code that runs them says -ize (SymmetrizedVi, symbnn.analyses.symmetrized_vi)
    symmetrised_vi: SymmetrizedVi | Literal[False] = setting(
        SymmetrizedVi(), "symmetrised VI and variational alignment (related work)"
    )
    symmetrised_vi_widths: SymmetrizedViWidths | Literal[False] = setting(
        SymmetrizedViWidths(),
        "mean-field vs symmetrised VI by width on the digits (related work)",
    )
    barrier_statistics: BarrierStatistics | Literal[False] = setting(
        BarrierStatistics(), "barriers over pairs of SGD and VI MLPs, with alignment (related work)"
    )

    def enabled(self, name: str) -> bool:
        return getattr(self, name) is not False

    def permutation_frequency_experiments(
        self, run: Iterable[str], experiments: Mapping[str, Any]
    ) -> list[str]:
        """Experiments of ``run`` that get Figure 4 (``experiments``: the configuration's
        `Experiment`s by name): every small model, and ResNet-18 where the experiment has
        GPUs (a laptop run plans no ResNet training)."""
        if not self.enabled("permutation_frequency"):
            return []

        def measured(name: str) -> bool:
            experiment = experiments[name]
            model = experiment.model.name
            on_gpus = model in GPU_FREQUENCY_MODELS and experiment.compute.gpus > 0
            return model in SMALL_MODELS or on_gpus

        return [name for name in run if measured(name)]
