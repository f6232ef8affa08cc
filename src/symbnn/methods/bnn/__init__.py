"""Variational BNN by Bayes by backprop (Blundell et al., 2015): the method as the workflow plans
it (config key `bnn`, settings `symbnn.settings.Bnn`), described by its class attributes like
any method. No torch here: its steps run the code of `symbnn.methods.bnn.fit`, imported inside
the jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from symbnn.methods.interface import BatchedMethod
from symbnn.settings import Bnn

if TYPE_CHECKING:  # torch: for the annotations only
    import torch

    from symbnn.methods.base import Fitted, Mode, Problem


class BayesByBackprop(BatchedMethod):
    settings = Bnn
    label = "BNN"
    trains_from_scratch = True

    def fit_modes(
        self,
        problem: Problem,
        modes: list[Mode],
        settings: Bnn,
        seeds: list[int],
        counts: list[int | None],
    ) -> list[Fitted]:
        # torch, imported here in jobs only: planning reads the class attributes alone
        from symbnn.methods.bnn.fit import fit_modes

        return fit_modes(problem, modes, settings, seeds, counts)

    def sample(
        self, problem: Problem, fitted: Fitted, count: int, settings: Bnn, seed: int
    ) -> dict[str, torch.Tensor]:
        # torch, imported here in jobs only: planning reads the class attributes alone
        from symbnn.methods.bnn.fit import sample

        return sample(problem, fitted, count, settings, seed)


METHOD = BayesByBackprop  # the class the registry describes (`symbnn.methods.registry`)

__all__ = ["METHOD", "BayesByBackprop"]
