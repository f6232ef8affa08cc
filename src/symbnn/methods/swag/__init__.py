"""SWAG (Maddox et al., 2019): the method as the workflow plans it (config key `swag`, settings
`symbnn.settings.Swag`), described by its class attributes like any method. No torch here: its
steps run the code of `symbnn.methods.swag.fit`, imported inside the jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from symbnn.methods.interface import BatchedMethod
from symbnn.settings import Swag

if TYPE_CHECKING:  # torch: for the annotations only
    import torch

    from symbnn.methods.base import Fitted, Mode, Problem


class SwagGaussian(BatchedMethod):
    settings = Swag
    label = "SWAG"
    sampling_keys = ("scale", "bn_update")

    def fit_modes(
        self,
        problem: Problem,
        modes: list[Mode],
        settings: Swag,
        seeds: list[int],
        counts: list[int | None],
    ) -> list[Fitted]:
        # torch, imported here in jobs only: planning reads the class attributes alone
        from symbnn.methods.swag.fit import fit_modes

        return fit_modes(problem, modes, settings, seeds, counts)

    def sample(
        self, problem: Problem, fitted: Fitted, count: int, settings: Swag, seed: int
    ) -> dict[str, torch.Tensor]:
        # torch, imported here in jobs only: planning reads the class attributes alone
        from symbnn.methods.swag.fit import sample

        return sample(problem, fitted, count, settings, seed)


METHOD = SwagGaussian  # the class the registry describes (`symbnn.methods.registry`)

__all__ = ["METHOD", "SwagGaussian"]
