"""What every row of benchmarks/peers.py shares: the default experiment's data and recipe at
the benchmark's size (full, or tiny for the tests), the trained pairs of networks, and the
quality figures both sides of a row are scored by."""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from symbnn.data import load_dataset
from symbnn.data.core import ImageData
from symbnn.methods.base import Problem
from symbnn.metrics import accuracy as ensemble_accuracy
from symbnn.models import build_model
from symbnn.predictions import predict_probabilities
from symbnn.settings import Recipe
from symbnn.settings.load import load_config
from symbnn.train.engine import train_seeds
from symbnn.train.evaluate import unstack

ROOT = Path(__file__).resolve().parents[1]
NLL_FLOOR = 2.0**-24  # as symbnn.metrics floors the probability of the label


@dataclass(frozen=True)
class Sizes:
    """How big every job is: the full benchmark, or a tiny one that runs each code path in
    seconds (the tests)."""

    images: int | None  # training, test and OOD images kept (None: all)
    epochs: int | None  # the recipe's epochs (None: the experiment's)
    ensemble: int  # members of every sampled ensemble
    mlp_widths: tuple[int, ...]
    mlp_epochs: int  # the MLP learns the digits in a few epochs
    resnet: dict  # the large model of the alignment job (random weights)
    metrics: tuple[tuple[int, int], ...]  # (members, inputs) of the synthetic metrics cases
    bnn_epochs: int | None  # the variational jobs' epochs (None: the recipe's)
    sghmc_epochs: float  # the chain: length, burn-in and sample spacing in epochs
    sghmc_burn_in: float
    sghmc_every: float
    swag_snapshots: int | None = None  # SWAG's snapshots and rank (None: the experiment's)
    # training images the Laplace job's curvature sums over: laplace-torch's diagonal GGN and
    # posteriors' both take per-image Jacobians (torch.func), seconds per hundred images
    laplace_images: int = 500


FULL = Sizes(
    images=None,
    epochs=None,
    ensemble=16,  # the default experiment's n_samples
    mlp_widths=(784, 128, 128, 10),
    mlp_epochs=4,
    resnet={"name": "resnet18", "num_classes": 10},
    metrics=((16, 1_000), (100, 10_000)),  # the default experiment's size, the paper's
    bnn_epochs=None,
    sghmc_epochs=40.0,
    sghmc_burn_in=10.0,
    sghmc_every=0.25,
)
TINY = Sizes(
    images=128,
    epochs=1,
    ensemble=4,
    mlp_widths=(784, 16, 10),
    mlp_epochs=1,
    resnet={"name": "resnet20_frn_silu", "num_classes": 10, "width": 4},
    metrics=((4, 100),),
    bnn_epochs=1,
    sghmc_epochs=2.0,
    sghmc_burn_in=0.0,
    sghmc_every=0.25,
    swag_snapshots=2,
    laplace_images=16,
)


def shortened(recipe: Recipe, epochs: int) -> Recipe:
    """``recipe`` over ``epochs`` epochs, its milestones (multistep only) scaled with it:
    a cosine schedule scales by itself and takes none."""
    milestones = sorted({max(1, m * epochs // recipe.epochs) for m in recipe.milestones})
    milestones = [m for m in milestones if m < epochs]
    return dataclasses.replace(recipe, epochs=epochs, milestones=tuple(milestones))


def _kept(data: ImageData, images: int | None) -> ImageData:
    """``images`` of ``data``, every class in proportion (the sets are sorted by class)."""
    return data if images is None or images >= len(data) else data.limited(images)


class Context:
    """The default experiment's data and recipe at ``sizes``; the trained pairs (seeds 0
    and 1) of the MLP and the OptuNet, trained when first asked for."""

    def __init__(self, sizes: Sizes = FULL, repeats: int = 5, blitz_own_init: bool = False):
        self.sizes = sizes
        self.experiment = load_config(ROOT / "config.yaml").experiments["default"]
        self.recipe = self.experiment.recipe
        if sizes.epochs is not None:
            self.recipe = shortened(self.recipe, sizes.epochs)
        self.train = _kept(load_dataset("digits", "train"), sizes.images)
        self.test = _kept(load_dataset("digits", "test"), sizes.images)
        ood = load_dataset("natural_patches", "test", **self.experiment.data.ood_options.to_dict())
        self.ood = ood if sizes.images is None else ood.subset(slice(0, sizes.images))
        self.optunet_spec = self.experiment.model.to_dict()
        self.mlp_spec = {"name": "mlp", "widths": list(sizes.mlp_widths)}
        self.repeats = repeats
        self.bnn_epochs = sizes.bnn_epochs or self.recipe.epochs
        self.blitz_own_init = blitz_own_init
        self._pairs: dict[str, tuple[tuple[dict, dict], tuple[float, float]]] = {}

    @property
    def ensemble(self) -> int:
        return self.sizes.ensemble

    def problem(self, **recipe_changes) -> Problem:
        recipe = dataclasses.replace(self.recipe, **recipe_changes)
        return Problem(self.optunet_spec, recipe, self.train, "cpu", test=self.test)

    def pair(self, name: str) -> tuple[tuple[dict, dict], tuple[float, float]]:
        """((state of seed 0, state of seed 1), their test accuracies) of "optunet" (the
        default experiment's model and recipe) or "mlp" (the same recipe over the sizes'
        mlp_epochs)."""
        if name not in self._pairs:
            recipe = self.recipe
            if name == "mlp":
                recipe = shortened(recipe, self.sizes.mlp_epochs)
            spec = self.mlp_spec if name == "mlp" else self.optunet_spec
            start = time.perf_counter()
            trained = train_seeds(spec, recipe, self.train, self.test, [0, 1])
            states = (unstack(trained.state, 0), unstack(trained.state, 1))
            accs = tuple(float(a) for a in trained.test_accuracy)
            self._pairs[name] = (states, accs)
            print(
                f"trained the {name} pair in {time.perf_counter() - start:.1f} s "
                f"(test accuracy {accs[0]:.3f}, {accs[1]:.3f})",
                file=sys.stderr,
                flush=True,
            )
        return self._pairs[name]


def model_with(spec: dict, state: dict) -> nn.Module:
    model = build_model(spec)
    model.load_state_dict(state)
    return model.eval()


@torch.no_grad()
def ensemble_probs(spec: dict, stacked: dict, data: ImageData, like: ImageData) -> torch.Tensor:
    """(K, N, C) softmax probabilities of every network of a stacked state dict."""
    model = build_model(spec)
    k = next(iter(stacked.values())).shape[0]
    out = []
    for i in range(k):
        model.load_state_dict(unstack(stacked, i))
        out.append(predict_probabilities(model, data, "cpu", normalized_like=like))
    return torch.stack(out)


def ensemble_quality(probs: torch.Tensor, labels: torch.Tensor) -> str:
    """Accuracy and NLL of the predictive mean (the same code for both libraries' ensembles;
    NLL floored at 2^-24 as symbnn.metrics does)."""
    log_pred = probs.double().mean(0).clamp_min(NLL_FLOOR).log()
    return (
        f"acc {ensemble_accuracy(probs, labels):.4f}, NLL {float(F.nll_loss(log_pred, labels)):.4f}"
    )


def stacked(states: list[dict]) -> dict:
    """A list of state dicts as one stacked state dict name -> (K, *shape)."""
    return {name: torch.stack([s[name] for s in states]) for name in states[0]}
