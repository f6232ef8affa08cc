"""Settings of the posterior approximations: the sampling as a whole (`Methods`) and one
section per method; a method runs when its key is present (``de: {}`` turns it on)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from symbnn.settings.base import (
    MAX_BATCH,
    MAX_DRAWS,
    MAX_EPOCHS,
    MAX_NETWORKS,
    MAX_SEED,
    ConfigError,
    Section,
    setting,
)
from symbnn.settings.training import recipe_changes


@dataclasses.dataclass(frozen=True)
class Dropout(Section):
    DOC = "MC Dropout: dropout before the last `layers` linear layers, in training and sampling"
    rate: float = setting(0.2, "dropout probability", ge=0, lt=1)
    layers: int = setting(1, "linear layers (from the output) that get dropout", ge=1, le=1000)


BnnRecipe = recipe_changes(
    "BnnRecipe",
    "changes to the experiment recipe for training the variational posterior",
    weight_decay=0.0,
)


@dataclasses.dataclass(frozen=True)
class Bnn(Section):
    DOC = "variational BNN by Bayes by backprop (mean-field Gaussian, BLiTZ scale-mixture prior)"
    kl_weight: float = setting(1.0, "weight of the KL term of the ELBO", ge=0)
    elbo_samples: int = setting(3, "weight draws per ELBO estimate", ge=1, le=MAX_DRAWS)
    prior_pi: float = setting(1.0, "mixture weight of the prior's first Gaussian", ge=0, le=1)
    prior_sigma1: float = setting(0.1, "standard deviation of the prior's first Gaussian", gt=0)
    prior_sigma2: float = setting(0.4, "standard deviation of the prior's second Gaussian", gt=0)
    rho_init: float = setting(-7.0, "initial rho (sigma = log(1 + exp(rho)))")
    recipe: BnnRecipe = setting(BnnRecipe(), "changes to the recipe for the variational training")


@dataclasses.dataclass(frozen=True)
class Sghmc(Section):
    DOC = (
        "stochastic-gradient Hamiltonian Monte Carlo chains started at the modes; the step and "
        "the prior scale with the training-set size N"
    )
    lr: float | None = setting(
        None,
        "SGD-equivalent learning rate on the mean loss (the step on the summed potential is "
        "lr / N); none: the recipe's last learning rate",
        gt=0,
    )
    friction: float = setting(0.1, "friction (1 - SGD momentum)", gt=0, le=1)
    temperature: float = setting(1.0, "temperature of the target density", ge=0)
    weight_decay: float | None = setting(
        None,
        "the Gaussian prior as a weight decay on the mean loss (prior precision N * "
        "weight_decay); none: the recipe's weight decay",
        ge=0,
    )
    burn_in_epochs: int = setting(2, "epochs run before the first sample", ge=0, le=MAX_EPOCHS)
    thinning_steps: int = setting(50, "steps between samples", ge=1, le=10_000_000)


@dataclasses.dataclass(frozen=True)
class Swag(Section):
    DOC = (
        "SWAG: diagonal plus low-rank Gaussian from SGD iterates continued at the modes, with "
        "a linear ramp to a high constant learning rate (SWALR)"
    )
    epochs: int | None = setting(
        None, "SGD epochs of the fit; none: twice the recipe's epochs", ge=1, le=MAX_EPOCHS
    )
    lr: float | None = setting(
        None, "the high constant learning rate; none: the recipe's initial learning rate", gt=0
    )
    ramp: float = setting(
        0.1,
        "share of the fit's steps over which lr ramps up linearly from the recipe's last",
        ge=0,
        lt=1,
    )
    snapshots: int = setting(
        20, "iterates collected, evenly spaced after the ramp", ge=2, le=MAX_DRAWS
    )
    rank: int = setting(20, "rank of the low-rank covariance term", ge=1, le=MAX_DRAWS)
    # used when sampling only: changing them redraws the samples, not the fit
    scale: float = setting(
        0.1, "covariance scale when sampling: scale * (diag + D D^T / (K - 1))", gt=0
    )
    bn_update: bool = setting(True, "recompute BatchNorm statistics for every sample")

    SAMPLING_KEYS = ("scale", "bn_update")


@dataclasses.dataclass(frozen=True)
class Laplace(Section):
    DOC = "Laplace approximation at the modes (laplace-torch)"
    subset: Literal["all", "last_layer"] = setting("all", "weights the approximation covers")
    hessian: Literal["full", "kron", "diag"] = setting(
        "full", "structure of the Hessian approximation"
    )
    prior_precision: Literal["marglik"] | float = setting(
        "marglik", "prior precision, or marglik to fit it by marginal likelihood", gt=0
    )
    predictive: Literal["linearised", "sampled"] = setting(
        "linearised",
        "how the metrics predict with a sample: the network linearised at its mode (the model "
        "the Gauss-Newton posterior and its marginal likelihood assume; laplace-torch's "
        "default GLM predictive), or the sampled network as is",
    )

    PREDICTION_KEYS = ("predictive",)


@dataclasses.dataclass(frozen=True)
class DeepEnsembles(Section):
    DOC = "Deep Ensembles: one sample per converged pool network (no settings)"


@dataclasses.dataclass(frozen=True)
class Methods(Section):
    DOC = (
        "posterior approximations; each method named here runs single-mode and multi-mode "
        "(Deep Ensembles: multi-mode only). Modes are the converged networks of a pool trained "
        "with the target recipe from seeds disjoint from the target's."
    )
    n_samples: int = setting(
        doc="weight samples per method and variant (the paper draws 100)", ge=2, le=MAX_DRAWS
    )
    modes: int = setting(
        doc="modes of the multi-mode variants, and the modes each single-mode variant is "
        "reported over (the paper uses 10)",
        ge=2,
        le=MAX_DRAWS,
    )
    pool: int = setting(
        doc="networks trained to find modes and Deep Ensemble members", ge=2, le=MAX_NETWORKS
    )
    first_seed: int = setting(1_000_000, "seed of the pool's first network", ge=0, le=MAX_SEED)
    seed: int = setting(0, "seed of every sampler's random draws", ge=0, le=MAX_SEED)
    retries: int = setting(
        5,
        "fresh seeds a method that trains from scratch (dropout, bnn) may try until its network "
        "reaches posterior.min_accuracy",
        ge=0,
        le=1000,
    )
    predict_batch: int = setting(
        1000, "test images per forward pass when predicting", ge=1, le=MAX_BATCH
    )
    dropout: Dropout | None = setting(None, "MC Dropout")
    bnn: Bnn | None = setting(None, "variational BNN")
    sghmc: Sghmc | None = setting(None, "SGHMC")
    swag: Swag | None = setting(None, "SWAG")
    laplace: Laplace | None = setting(None, "Laplace")
    de: DeepEnsembles | None = setting(None, "Deep Ensembles")

    def check(self, where: str) -> None:
        if self.modes > self.pool:
            raise ConfigError(f"{where}.modes: {self.modes} exceeds pool ({self.pool})")
        if self.n_samples < self.modes:
            raise ConfigError(
                f"{where}.n_samples: {self.n_samples} is below modes ({self.modes}): every mode needs a sample"
            )
        if self.de is not None and self.n_samples > self.pool:
            raise ConfigError(
                f"{where}.n_samples: {self.n_samples} exceeds pool ({self.pool}): Deep Ensembles "
                "take one pool network per sample"
            )

    @property
    def pool_seeds(self) -> range:
        return range(self.first_seed, self.first_seed + self.pool)
