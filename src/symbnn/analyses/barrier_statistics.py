"""Loss and accuracy barriers over many pairs of MLPs, before and after alignment modulo
permutations: SGD networks and mean-field VI posteriors, on the packaged digits.

For each of ``pairs`` disjoint pairs of seeds (2i, 2i + 1 after ``first_seed``) two MLPs are
trained from their own initialisations: by SGD (`symbnn.train.train_seeds`) and by Bayes by
backprop with Adam (`symbnn.methods.bnn.fit.MeanFieldBNN`: a mean-field Gaussian per weight, a
Gaussian prior). B is then aligned
to A by weight matching (`symbnn.alignment`): the network's weights for SGD, the means and
standard deviations together (2-Wasserstein cost between the diagonal Gaussians) for VI.
Along the straight path theta(t) = (1 - t) A + t B, t in [0, 1], on the train and test splits:

* SGD: the loss (mean cross-entropy) and accuracy of the network theta(t);
* VI: the expected loss over common-noise draws of the interpolated Gaussian (means and
  standard deviations interpolated), and the accuracy of its predictive mean.

The loss barrier is max_t L(t) - ((1 - t) L(0) + t L(1)); the accuracy barrier is the
largest drop below the endpoints' interpolation, max_t ((1 - t) a(0) + t a(1)) - a(t). Both
are >= 0 (t = 0 gives 0). `summary` reports mean, standard deviation, minimum and maximum over
the pairs, with the endpoints' worst test accuracy so that a table over networks that did not
train cannot pass unnoticed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl
import torch

from symbnn.alignment import align_gaussian, align_state
from symbnn.alignment.interpolation import gaussian_curve, grid, network_curve
from symbnn.alignment.pairs import curve_rows
from symbnn.data import load_dataset
from symbnn.data.core import ImageData
from symbnn.methods.bnn.fit import MeanFieldBNN, gaussian_state, noise_generator
from symbnn.settings import BarrierStatistics, Recipe
from symbnn.symmetry import unit_groups
from symbnn.train import train_seeds
from symbnn.train.evaluate import unstack
from symbnn.train.loop import seed_batches
from symbnn.train.seeding import build_seeded_model

State = dict[str, torch.Tensor]


def mlp_spec(settings: BarrierStatistics, train: ImageData) -> dict:
    inputs = int(np.prod(train.images.shape[1:]))
    return {"name": "mlp", "widths": [inputs, *settings.hidden, train.num_classes]}


def recipe(settings: BarrierStatistics) -> Recipe:
    return Recipe(
        epochs=settings.epochs,
        batch_size=settings.batch_size,
        lr=settings.lr,
        momentum=settings.momentum,
        schedule="constant",
    )


def sgd_rows(
    settings: BarrierStatistics,
    spec: dict,
    data: Mapping[str, ImageData],
    sets: Mapping[str, ImageData],
) -> list[dict]:
    seeds = range(settings.first_seed, settings.first_seed + 2 * settings.pairs)
    trained = train_seeds(spec, recipe(settings), data["train"], data["test"], seeds)
    sym, ts = unit_groups(spec), grid(settings.points)
    rows = []
    for pair in range(settings.pairs):
        a, b = unstack(trained.state, 2 * pair), unstack(trained.state, 2 * pair + 1)
        aligned, _ = align_state(a, b, sym)
        for label, other in (("none", b), ("weight_matching", aligned)):
            curves = network_curve(spec, a, other, ts, sets)
            rows += curve_rows(curves, kind="sgd", pair=pair, alignment=label)
    return rows


def variational_posterior(
    settings: BarrierStatistics, spec: dict, train: ImageData, seed: int
) -> tuple[State, State]:
    """(means, standard deviations) of a mean-field posterior fitted from seed's init by
    Bayes by backprop with Adam (SGD at the networks' learning rate barely moves the
    standard deviations from their initial value in a few epochs), in seed's data order."""
    q = MeanFieldBNN(
        build_seeded_model(spec, seed),
        settings.rho_init,
        1.0,
        settings.prior_sigma,
        settings.prior_sigma,
        noise_generator(seed),
    )
    optimizer = torch.optim.Adam(q.parameters(), lr=settings.vi_lr)
    for _, x, y in seed_batches(train, settings.batch_size, seed, settings.epochs):
        loss = q.elbo_loss(x, y, len(train), settings.elbo_samples)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return gaussian_state(q)


def variational_rows(
    settings: BarrierStatistics,
    spec: dict,
    data: Mapping[str, ImageData],
    sets: Mapping[str, ImageData],
) -> list[dict]:
    sym, ts = unit_groups(spec), grid(settings.points)
    rows = []
    for pair in range(settings.pairs):
        seed = settings.first_seed + 2 * pair
        (mean_a, std_a), (mean_b, std_b) = (
            variational_posterior(settings, spec, data["train"], s) for s in (seed, seed + 1)
        )
        mean_al, std_al, _ = align_gaussian(mean_a, std_a, mean_b, std_b, sym)
        for label, mean, std in (("none", mean_b, std_b), ("weight_matching", mean_al, std_al)):
            curves = gaussian_curve(
                spec, mean_a, std_a, mean, std, ts, sets, settings.samples, seed=pair
            )
            rows += curve_rows(curves, kind="mean_field_vi", pair=pair, alignment=label)
    return rows


def barrier_pairs(settings: BarrierStatistics, data_root: str | Path = "data") -> pl.DataFrame:
    """One row per (kind, pair, alignment, split): loss and accuracy barriers, endpoints."""
    data = {split: load_dataset(settings.dataset, split, data_root) for split in ("train", "test")}
    spec = mlp_spec(settings, data["train"])
    curve_sets = {split: data[split] for split in settings.splits}
    rows = sgd_rows(settings, spec, data, curve_sets)
    rows += variational_rows(settings, spec, data, curve_sets)
    return pl.DataFrame(rows)
