"""SGHMC chains started at the modes: the method as the workflow plans it (config key `sghmc`,
settings `symbnn.settings.Sghmc`), described by its class attributes like any method. No torch
here: its steps run the code of `symbnn.methods.sghmc.fit`, imported inside the jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from symbnn.methods.interface import BatchedMethod
from symbnn.settings import Sghmc

if TYPE_CHECKING:  # torch: for the annotations only
    import torch

    from symbnn.methods.base import Fitted, Mode, Problem


class SghmcChains(BatchedMethod):
    settings = Sghmc
    label = "SGHMC"
    samples_at_fit = True

    def fit_modes(
        self,
        problem: Problem,
        modes: list[Mode],
        settings: Sghmc,
        seeds: list[int],
        counts: list[int | None],
    ) -> list[Fitted]:
        # torch, imported here in jobs only: planning reads the class attributes alone
        from symbnn.methods.sghmc.fit import fit_modes

        return fit_modes(problem, modes, settings, seeds, counts)

    def sample(
        self, problem: Problem, fitted: Fitted, count: int, settings: Sghmc, seed: int
    ) -> dict[str, torch.Tensor]:
        # torch, imported here in jobs only: planning reads the class attributes alone
        from symbnn.methods.sghmc.fit import sample

        return sample(problem, fitted, count, settings, seed)


METHOD = SghmcChains  # the class the registry describes (`symbnn.methods.registry`)

__all__ = ["METHOD", "SghmcChains"]
