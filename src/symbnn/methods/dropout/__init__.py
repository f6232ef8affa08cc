"""MC Dropout (Gal & Ghahramani, 2016): the method as the workflow plans it (config key `dropout`,
settings `symbnn.settings.Dropout`), described by its class attributes like any method. No torch
here: its steps run the code of `symbnn.methods.dropout.fit`, imported inside the jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from symbnn.methods.interface import BatchedMethod
from symbnn.settings import Dropout

if TYPE_CHECKING:  # torch: for the annotations only
    import torch

    from symbnn.methods.base import Fitted, Mode, Problem


class McDropout(BatchedMethod):
    settings = Dropout
    label = "MC Dropout"
    trains_from_scratch = True

    def fit_modes(
        self,
        problem: Problem,
        modes: list[Mode],
        settings: Dropout,
        seeds: list[int],
        counts: list[int | None],
    ) -> list[Fitted]:
        # torch, imported here in jobs only: planning reads the class attributes alone
        from symbnn.methods.dropout.fit import fit_modes

        return fit_modes(problem, modes, settings, seeds, counts)

    def sample(
        self, problem: Problem, fitted: Fitted, count: int, settings: Dropout, seed: int
    ) -> dict[str, torch.Tensor]:
        # torch, imported here in jobs only: planning reads the class attributes alone
        from symbnn.methods.dropout.fit import sample

        return sample(problem, fitted, count, settings, seed)


METHOD = McDropout  # the class the registry describes (`symbnn.methods.registry`)

__all__ = ["METHOD", "McDropout"]
