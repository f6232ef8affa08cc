"""The Laplace approximation at the modes (laplace-torch): the method as the workflow plans it
(config key `laplace`, settings `symbnn.settings.Laplace`), described by its class attributes
like any method. No torch here: its steps run the code of `symbnn.methods.laplace.fit`, imported
inside the jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from symbnn.methods.interface import Method
from symbnn.settings import Laplace

if TYPE_CHECKING:  # torch: for the annotations only
    import torch

    from symbnn.methods.base import Fitted, Mode, Problem


class LaplaceApproximation(Method):
    settings = Laplace
    label = "Laplace"
    samples_at_fit = True
    prediction_keys = ("predictive",)

    def fit(
        self, problem: Problem, mode: Mode, settings: Laplace, seed: int, count: int | None
    ) -> Fitted:
        # torch, imported here in jobs only: planning reads the class attributes alone
        from symbnn.methods.laplace.fit import fit

        return fit(problem, mode, settings, seed, count)

    def sample(
        self, problem: Problem, fitted: Fitted, count: int, settings: Laplace, seed: int
    ) -> dict[str, torch.Tensor]:
        # torch, imported here in jobs only: planning reads the class attributes alone
        from symbnn.methods.laplace.fit import sample

        return sample(problem, fitted, count, settings, seed)


METHOD = LaplaceApproximation  # the class the registry describes (`symbnn.methods.registry`)

__all__ = ["METHOD", "LaplaceApproximation"]
