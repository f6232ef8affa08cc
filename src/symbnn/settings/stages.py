"""Settings of the stages that read a trained posterior: symmetry removal and min-mass, the
layer-wise MMD, the uncertainty metrics, functional collapse and alignment."""

from __future__ import annotations

import dataclasses
from typing import Literal

from symbnn.settings.base import MAX_DRAWS, MAX_NETWORKS, MAX_POINTS, MAX_SEED, Section, setting
from symbnn.settings.methods import Bnn

Split = Literal["train", "test"]


@dataclasses.dataclass(frozen=True)
class SymmetryRemoval(Section):
    DOC = "symmetry removal (canonical form) and the min-mass problem"
    scale: Literal["unitnorm", "unitstd"] = setting(
        "unitnorm", "scale normalisation of the canonical form"
    )
    key: Literal["first", "max"] = setting(
        "first", "sorting key of the canonical permutation (first: the paper's)"
    )
    solver: Literal["fast", "cvxpy"] = setting(
        "fast", "min-mass solver (cvxpy is the slow reference)"
    )


@dataclasses.dataclass(frozen=True)
class Mmd(Section):
    DOC = "layer-wise MMD against the target posterior"
    de_members: int | None = setting(
        None,
        "converged target networks set aside as a Deep Ensemble and compared with the rest "
        "(none: no such check)",
        ge=2,
        le=MAX_NETWORKS,
    )
    pvalue: bool = setting(False, "run MMDAgg's aggregated permutation test")
    method_pvalue: bool | None = setting(
        None,
        "run it for every unit of every method too (Table 1's MMD rej columns); none: as "
        "pvalue. Each unit's test costs about as much as its MMD many times over, and the "
        "findings read the MMD itself",
    )
    seed: int = setting(0, "seed of the permutation test", ge=0, le=MAX_SEED)
    de_target: int | None = setting(
        None,
        "target networks the Deep Ensemble is compared with: the converged ones just before "
        "the members (none: every other converged network). The permutation test's cost grows "
        "with the square of the sample: the paper compared 1,000 with 100 members",
        ge=2,
        le=MAX_NETWORKS,
    )

    def to_dict(self) -> dict:
        # de_target and method_pvalue left out while unset, so adding them changed no existing
        # run's params
        out = super().to_dict()
        for key in ("de_target", "method_pvalue"):
            if out[key] is None:
                del out[key]
        return out

    @property
    def methods_tested(self) -> bool:
        """Whether the methods' MMDs get the permutation test."""
        return self.pvalue if self.method_pvalue is None else self.method_pvalue


@dataclasses.dataclass(frozen=True)
class MmdTest(Section):
    """MMDAgg's aggregated permutation test (`symbnn.mmd.aggtest`): the reference defaults of
    Schrab et al.; `symbnn mmd` takes its --alpha/--b1/--b2/--b3 from here."""

    DOC = "MMDAgg's level, permutations for the quantiles and the level correction, bisection steps"
    alpha: float = setting(0.05, "level of the test", gt=0, lt=1)
    b1: int = setting(2000, "permutations for the quantiles", ge=1, le=1_000_000)
    b2: int = setting(2000, "permutations for the level correction", ge=1, le=1_000_000)
    # the bisection halves an interval of width at most 20: 64 steps exhaust a float64
    b3: int = setting(50, "bisection steps of the level correction", ge=1, le=1000)


@dataclasses.dataclass(frozen=True)
class Metrics(Section):
    DOC = "uncertainty metrics of the methods' predictions"
    ood_score: Literal["msp", "entropy", "mi"] = setting(
        "msp", "OOD score, higher = more OOD (msp: 1 - max probability; mi: mutual information)"
    )
    bins: int = setting(15, "bins of the expected calibration error", ge=1, le=100_000)


@dataclasses.dataclass(frozen=True)
class Collapse(Section):
    DOC = "functional collapse: pairwise MI of random pairs of converged target networks"
    pairs: int = setting(1000, "random distinct pairs of converged networks", ge=1, le=10_000_000)
    seed: int = setting(0, "seed of the pair draw and of the permutation test", ge=0, le=MAX_SEED)
    permutations: int = setting(
        999,
        "network relabellings of the correlation's permutation test (0: no test)",
        ge=0,
        le=1_000_000,
    )
    test_networks: int = setting(
        256,
        "networks at most in the permutation test (the OOD MI of all their pairs is computed)",
        ge=3,
        le=MAX_NETWORKS,
    )


@dataclasses.dataclass(frozen=True)
class VariationalPairs(Section):
    DOC = (
        "pairs of mean-field VI posteriors (Bayes by backprop, each from its own seed, with "
        "the experiment's model and data), aligned and compared like the networks"
    )
    pairs: int = setting(10, "independent pairs (two fresh seeds each)", ge=1, le=MAX_DRAWS)
    first_seed: int = setting(
        2_000_000,
        "seed of the first fit (apart from the target's and the pool's seeds)",
        ge=0,
        le=MAX_SEED,
    )
    samples: int = setting(8, "common-noise weight draws per point of a path", ge=1, le=MAX_DRAWS)
    retries: int = setting(
        5, "fresh seeds a fit may try until its means reach posterior.min_accuracy", ge=0, le=1000
    )
    bnn: Bnn = setting(Bnn(), "the variational fits (as the BNN method's settings)")

    def seeds(self) -> list[int]:
        """The fits' seeds: pair i is (first_seed + 2i, first_seed + 2i + 1)."""
        return list(range(self.first_seed, self.first_seed + 2 * self.pairs))


@dataclasses.dataclass(frozen=True)
class Alignment(Section):
    DOC = (
        "pairs of target networks (and, optionally, of VI posteriors) aligned modulo "
        "permutations, and the loss and accuracy barriers between them"
    )
    pairs: int = setting(
        1,
        "pairs of converged target networks (the 2i-th and (2i+1)-th converged ones)",
        ge=1,
        le=MAX_NETWORKS,
    )
    points: int = setting(
        11, "points on the interpolation path, endpoints included", ge=2, le=MAX_POINTS
    )
    splits: tuple[Split, ...] = setting(
        ("train", "test"), "sets the barrier is measured on", min_items=1, unique=True
    )
    bn_batches: int = setting(
        20, "training batches that re-estimate BatchNorm statistics at every t", ge=1, le=100_000
    )
    max_sweeps: int = setting(
        100, "coordinate-descent sweeps of weight matching at most", ge=1, le=100_000
    )
    variational: VariationalPairs | None = setting(
        None, "pairs of mean-field VI posteriors as well (none: the networks only)"
    )
