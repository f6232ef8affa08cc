"""Settings of the posterior approximations: the sampling as a whole (`Methods`) and one
section per shipped method (`SECTIONS`; `SHIPPED` is their keys); a method runs when its key
is present (``de: {}`` turns it on). Any other key of `Methods` is a method of the user's own,
named by the import path of its class (``mine: {class: "package.module:Mine", ...its
settings}``).

A shipped method is its settings section here and its folder `symbnn.methods.<key>`: a
`symbnn.methods.interface.Method` subclass that describes it by its class attributes, as a
user's class does, and its code. The sections live here, not in the folders, because the
settings layer imports nothing above itself and `Methods` needs every shipped section to
read a configuration; the settings check the pool a method's replicates take with the
descriptor of `symbnn.settings.descriptor`."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from symbnn.settings.base import (
    MAX_BATCH,
    MAX_DRAWS,
    MAX_EPOCHS,
    MAX_NETWORKS,
    MAX_SEED,
    MAX_STEPS,
    ConfigError,
    ImportPath,
    Problems,
    Section,
    _join,
    _suggest,
    internal_setting,
    is_internal,
    parse_value,
    plain,
    setting,
)
from symbnn.settings.descriptor import Descriptor, members_span
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
        "stochastic-gradient Hamiltonian Monte Carlo chains started at the modes: the paper's "
        "reference sampler (scale-adapted SGHMC with a Gamma hyperprior) or Chen et al.'s "
        "momentum form; the chain's length, burn-in and sample spacing default to the reference's "
        "MNIST schedule in proportion to the recipe's epochs"
    )
    variant: Literal["scale_adapted", "momentum"] = setting(
        "scale_adapted",
        "the sampler: scale_adapted (the reference code's H_SA_SGHMC, Springenberg et al. 2016: "
        "preconditioned by running gradient estimates adapted during burn-in, prior precisions "
        "Gibbs-sampled, velocity redrawn) or momentum (Chen et al. 2014, eq. 15)",
    )
    lr: float | None = setting(
        None,
        "step size. scale_adapted: the reference's lr (a step moves the velocity by lr^2 "
        "V^-1/2 grad U); none: 0.01, the reference's MNIST value. momentum: the SGD-equivalent "
        "learning rate on the mean loss (the step on the summed potential is lr / N); none: the "
        "recipe's last learning rate",
        gt=0,
    )
    friction: float | None = setting(
        None,
        "friction per step (1 - SGD momentum; the reference's base C); none: 0.05 (the "
        "reference's) for scale_adapted, 0.1 for momentum",
        gt=0,
        le=1,
    )
    temperature: float = setting(
        1.0, "temperature of the target density (momentum only; scale_adapted samples at 1)", ge=0
    )
    hyperprior: bool = setting(
        True,
        "scale_adapted: each parameter tensor's prior precision has a Gamma(alpha0, beta0) "
        "hyperprior and is Gibbs-sampled; false: fixed at N * weight_decay",
    )
    alpha0: float = setting(10.0, "shape of the Gamma hyperprior (scale_adapted)", gt=0)
    beta0: float = setting(10.0, "rate of the Gamma hyperprior (scale_adapted)", gt=0)
    prior_resample_steps: int = setting(
        15,
        "steps between Gibbs draws of the prior precisions, the first step drawing (scale_adapted)",
        ge=1,
        le=MAX_STEPS,
    )
    momentum_resample_steps: int = setting(
        50,
        "steps between fresh velocity draws from N(0, lr^2 V^-1/2), the first step drawing "
        "(scale_adapted)",
        ge=1,
        le=MAX_STEPS,
    )
    weight_decay: float | None = setting(
        None,
        "the fixed Gaussian prior as a weight decay on the mean loss, prior precision N * "
        "weight_decay (momentum, and scale_adapted without hyperprior); none: the recipe's "
        "weight decay",
        ge=0,
    )
    epochs: float | None = setting(
        None,
        "the chain's length in epochs: it holds (epochs - burn_in_epochs) / sample_every_epochs "
        "samples and stops at the last one asked for; none: the recipe's epochs x 250 / 60",
        gt=0,
        le=MAX_EPOCHS,
    )
    burn_in_epochs: float | None = setting(
        None,
        "epochs before the first sample (scale_adapted adapts its preconditioner during them); "
        "none: the recipe's epochs x 20 / 60",
        ge=0,
        le=MAX_EPOCHS,
    )
    sample_every_epochs: float | None = setting(
        None,
        "epochs between samples, rounded to whole steps (at least one); none: the recipe's "
        "epochs x 2 / 60",
        gt=0,
        le=MAX_EPOCHS,
    )
    batch_size: int | None = setting(
        None, "minibatch size of the chain; none: the recipe's", ge=1, le=MAX_BATCH
    )

    # the defaults that depend on the variant (None above): the reference code's lr and base C
    VARIANT_DEFAULTS: ClassVar[dict[str, dict[str, float]]] = {
        "scale_adapted": {"lr": 0.01, "friction": 0.05},
        "momentum": {"friction": 0.1},
    }
    # The reference's MNIST chain (250 epochs, 20 of burn-in, a sample every 2) against the
    # paper's 60-epoch OptuNet recipe: unset schedule settings keep these proportions to the
    # experiment's recipe (docs/deviations.md D10).
    REFERENCE_CHAIN: ClassVar[tuple[float, float, float]] = (250.0, 20.0, 2.0)
    REFERENCE_RECIPE_EPOCHS: ClassVar[float] = 60.0
    MOMENTUM_ONLY: ClassVar[tuple[str, ...]] = ("temperature",)
    SCALE_ADAPTED_ONLY: ClassVar[tuple[str, ...]] = (
        "hyperprior",
        "alpha0",
        "beta0",
        "prior_resample_steps",
        "momentum_resample_steps",
    )

    def check(self, where: str) -> None:
        other = "momentum" if self.variant == "scale_adapted" else "scale_adapted"
        only = self.MOMENTUM_ONLY if other == "momentum" else self.SCALE_ADAPTED_ONLY
        for f in dataclasses.fields(self):
            if f.name in only and getattr(self, f.name) != f.default:
                raise ConfigError(
                    f"{where}.{f.name}: applies to variant {other} only (variant is {self.variant})"
                )
        if self.variant == "scale_adapted" and self.hyperprior and self.weight_decay is not None:
            raise ConfigError(
                f"{where}.weight_decay: the hyperprior samples the prior precision; set "
                "hyperprior: false for a fixed prior"
            )
        length, burn_in, every = self.epochs, self.burn_in_epochs, self.sample_every_epochs
        if None not in (length, burn_in, every) and burn_in + every > length:
            raise ConfigError(
                f"{where}.epochs: {length:g} epochs hold no sample after {burn_in:g} burn-in "
                f"epochs and {every:g} epochs between samples"
            )

    def variant_default(self, name: str) -> float | None:
        """Setting `name`, or the variant's default where it is unset (lr, friction)."""
        value = getattr(self, name)
        return value if value is not None else self.VARIANT_DEFAULTS[self.variant].get(name)

    def chain_epochs(self, recipe_epochs: float) -> tuple[float, float, float]:
        """(length, burn-in, spacing) of the chain in epochs: the settings, or the reference's
        in proportion to the recipe's epochs."""
        ratio = recipe_epochs / self.REFERENCE_RECIPE_EPOCHS
        chosen = (self.epochs, self.burn_in_epochs, self.sample_every_epochs)
        return tuple(
            value if value is not None else ratio * reference
            for value, reference in zip(chosen, self.REFERENCE_CHAIN)
        )


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


@dataclasses.dataclass(frozen=True)
class DeepEnsembles(Section):
    DOC = "Deep Ensembles: one sample per converged pool network"
    stride: int | None = setting(
        None,
        "converged pool networks between the first members of consecutive replicates "
        "(replicate r takes n_samples networks from r * stride); none: n_samples, so "
        "replicates share no member",
        ge=1,
        le=MAX_NETWORKS,
    )

    def stride_in(self, methods: Methods) -> int:
        """Pool networks between the first members of consecutive replicates (what
        `Descriptor.stride` reads; a section whose samples are pool members defines it, and
        `Methods.check` checks the pool holds them)."""
        return self.stride or methods.n_samples


# The shipped methods' settings sections by config key, in the order of Table 1's rows; a
# method runs when its key is present. Each key names a folder src/symbnn/methods/<key>/ whose
# class describes the method and whose `fit` module holds its code (docs/extending.md).
SECTIONS: dict[str, type[Section]] = {
    "dropout": Dropout,
    "bnn": Bnn,
    "sghmc": Sghmc,
    "swag": Swag,
    "laplace": Laplace,
    "de": DeepEnsembles,
}
SHIPPED: tuple[str, ...] = tuple(SECTIONS)

# a method's config key: it names its results folder and is a workflow wildcard
METHOD_NAME = r"[a-z][a-z0-9_]*"


@dataclasses.dataclass(frozen=True)
class ImportedMethod:
    """A method of the user's own: its config key, the import path of its class (the key
    `class`) and its other keys as written: the class's settings, checked by the class's own
    settings section once the class is imported (`symbnn.methods.registry.settings_of`)."""

    name: str
    path: str
    options: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.path, **plain(dict(self.options))}


def _one_field_per_shipped_method(cls: type) -> type:
    """Give `Methods` an optional field per shipped method (its settings section), after the
    fields its class body declares."""
    for name, section in SECTIONS.items():
        cls.__annotations__[name] = section | None
        setattr(
            cls, name, setting(None, "turns the method on, with these settings ({}: the defaults)")
        )
    return cls


@dataclasses.dataclass(frozen=True)
@_one_field_per_shipped_method
class Methods(Section):
    DOC = (
        "posterior approximations; each method named here runs single-mode and multi-mode "
        "(Deep Ensembles: multi-mode only). Modes are the converged networks of a pool trained "
        "with the target recipe from seeds disjoint from the target's. Besides the shipped "
        "methods, a key holding a mapping with `class: package.module:Class` is a method of "
        "your own (its other keys are its settings)."
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
    replicates: int = setting(
        1,
        "multi-mode posteriors drawn per method, each from its own modes (or, for Deep "
        "Ensembles, members), so that a multi-mode row has a spread to test against",
        ge=1,
        le=MAX_DRAWS,
    )
    modes_per_replicate: int | None = setting(
        None,
        "modes each multi-mode replicate splits its samples among (replicate r takes the modes "
        "from r on, cyclically); none: all modes",
        ge=1,
        le=MAX_NETWORKS,
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
    fit_block: int | None = setting(
        None,
        "modes per fit job of the methods that fit their modes in one batched run (dropout, "
        "bnn, sghmc, swag, on an OptuNet or MLP without augmentation); none: all modes in one "
        "job. A mode's fit is the same in any block, so a cluster may set 1 (one job per "
        "mode, run in parallel); other models and recipes fit one mode per job (deviation D40)",
        ge=1,
        le=MAX_NETWORKS,
    )
    predict_batch: int = setting(
        1000, "test images per forward pass when predicting", ge=1, le=MAX_BATCH
    )
    imported: tuple[ImportedMethod, ...] = internal_setting(
        (), "the methods of the user's own, in the order the configuration names them"
    )

    @classmethod
    def split_extra_keys(
        cls, data: Mapping, where: str, problems: Problems
    ) -> tuple[Mapping, dict[str, Any]]:
        """Every key that is not a field names a method of the user's own: a mapping with
        `class` (an import path; nothing is imported here) and the class's settings."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        own, imported = {}, []
        for key, value in data.items():
            field = fields.get(key)
            if field is not None and not is_internal(field):
                own[key] = value
                continue
            here = _join(where, key)
            if not (isinstance(value, Mapping) and "class" in value):
                known = [name for name, f in fields.items() if not is_internal(f)]
                problems.add(
                    f"{here}: unknown key{_suggest(str(key), known)}; a method of your own is "
                    "a mapping with `class: package.module:Class` and its settings"
                )
            elif field is not None or not re.fullmatch(METHOD_NAME, str(key)):
                problems.add(
                    f"{here}: a method's name is lower-case letters, digits and '_' (it names "
                    "its results folder)" + (" and not a key of methods" if field else "")
                )
            else:
                with problems.collect():
                    path = parse_value(ImportPath, value["class"], f"{here}.class")
                    options = {k: v for k, v in value.items() if k != "class"}
                    imported.append(ImportedMethod(str(key), path, options))
        return own, {"imported": tuple(imported)}

    @classmethod
    def schema_extras(cls) -> dict[str, Any]:
        return {
            "propertyNames": {"pattern": f"^{METHOD_NAME}$"},
            "additionalProperties": {
                "description": "a method of your own: `class` names its class (a subclass of "
                "symbnn.methods.interface.Method), the other keys are its settings",
                "type": "object",
                "required": ["class"],
                "properties": {"class": dict(ImportPath.SCHEMA)},
            },
        }

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), **{m.name: m.to_dict() for m in self.imported}}

    def check(self, where: str) -> None:
        if self.modes_per_replicate is not None and self.modes_per_replicate > self.modes:
            raise ConfigError(
                f"{where}.modes_per_replicate: {self.modes_per_replicate} exceeds modes "
                f"({self.modes})"
            )
        if self.modes > self.pool:
            raise ConfigError(f"{where}.modes: {self.modes} exceeds pool ({self.pool})")
        if self.n_samples < self.window:
            raise ConfigError(
                f"{where}.n_samples: {self.n_samples} is below the {self.window} modes of a "
                "multi-mode replicate: every mode needs a sample"
            )
        for name in SHIPPED:
            settings = getattr(self, name)
            stride_in = getattr(settings, "stride_in", None)  # a section of pool members
            if stride_in is not None:
                self._check_members(name, stride_in(self), where)

    def check_pool(self, descriptor: Descriptor, settings: Section, where: str) -> None:
        """The pool must hold the networks a method's replicates take (a method whose samples
        are pool members; a method of the user's own, once its class is described)."""
        if descriptor.members:
            self._check_members(descriptor.name, descriptor.stride(self, settings), where)

    def _check_members(self, name: str, stride: int, where: str) -> None:
        needed = members_span(self, stride)
        if needed > self.pool:
            raise ConfigError(
                f"{where}.pool: {self.pool} is below the {needed} networks that "
                f"{self.replicates} replicate(s) of {name} of {self.n_samples} members "
                f"(stride {stride}) take; raise pool or {name}.stride's overlap (a smaller "
                "stride)"
            )

    @property
    def window(self) -> int:
        """Modes per multi-mode replicate."""
        return self.modes_per_replicate or self.modes

    @property
    def pool_seeds(self) -> range:
        return range(self.first_seed, self.first_seed + self.pool)
