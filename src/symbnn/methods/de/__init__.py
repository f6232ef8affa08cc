"""Deep Ensembles (Lakshminarayanan et al., 2017): the method as the workflow plans it (config key
`de`, settings `symbnn.settings.DeepEnsembles`), described by its class attributes like any
method. No torch here: its steps run the code of `symbnn.methods.de.fit`, imported inside the
jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from symbnn.methods.interface import Method
from symbnn.settings import DeepEnsembles

if TYPE_CHECKING:  # torch: for the annotations only
    import torch

    from symbnn.methods.base import Fitted, Mode, Problem


class DeepEnsembleMembers(Method):
    settings = DeepEnsembles
    label = "Deep Ensembles"
    samples_at_fit = True
    members = True
    variants = ("multi",)

    def fit(
        self, problem: Problem, mode: Mode, settings: DeepEnsembles, seed: int, count: int | None
    ) -> Fitted:
        # torch, imported here in jobs only: planning reads the class attributes alone
        from symbnn.methods.de.fit import fit

        return fit(problem, mode, settings, seed, count)

    def sample(
        self, problem: Problem, fitted: Fitted, count: int, settings: DeepEnsembles, seed: int
    ) -> dict[str, torch.Tensor]:
        # torch, imported here in jobs only: planning reads the class attributes alone
        from symbnn.methods.de.fit import sample

        return sample(problem, fitted, count, settings, seed)


METHOD = DeepEnsembleMembers  # the class the registry describes (`symbnn.methods.registry`)

__all__ = ["METHOD", "DeepEnsembleMembers"]
