"""The method interface: `Method`, the class a posterior approximation subclasses (shipped
or the user's own, one way for both), and `describe`, which reads its class attributes into a
`Descriptor` (`symbnn.settings.descriptor`: what the workflow needs to plan it, no torch).

A method's class is imported when the workflow plans (to read its description), its torch
code only inside jobs: `fit` at one mode (`fit_modes` at a block of them), `sample` draws
samples from a fit (`symbnn.methods.base` has the Problem and Mode they take). A shipped
method is a folder `symbnn.methods.<key>` whose `__init__` holds its class (no torch) and
whose `fit` module its torch code.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from symbnn.settings.base import Section
from symbnn.settings.descriptor import VARIANTS, Descriptor, Draw, split_counts

if TYPE_CHECKING:  # torch: for the annotations only, planning imports none
    import torch

    from symbnn.methods.base import Fitted, Mode, Problem

__all__ = [
    "STEPS",
    "VARIANTS",
    "BatchedMethod",
    "Descriptor",
    "Draw",
    "Method",
    "describe",
    "split_counts",
]


class Method(ABC):
    """A posterior approximation: subclass it, say what it is by the class attributes below
    and define `fit` and `sample`.

    ``fit(problem, mode, settings, seed, count)`` learns what the method needs at one mode
    (`symbnn.methods.base.Problem` and `Mode`) and returns it as tensors, numbers and strings
    in dicts and lists (saved as a safetensors tree by `symbnn.treefile`, never pickled);
    ``count`` is the number of samples the fit must draw when ``samples_at_fit`` (else None).
    ``fit_modes(problem, modes, settings, seeds, counts)`` fits a block of modes (by default
    one `fit` after another); a `BatchedMethod` fits them in one batched run, each mode's
    fit what `fit` gives it alone.
    ``sample(problem, fitted, count, settings, seed)`` returns ``count`` samples, a stacked
    state dict of the experiment's model: name -> (count, *shape).

    Every method, a shipped one (`symbnn.methods.<key>`) or one named by import path in
    config.yaml (``methods: {mine: {class: "package.module:Mine", ...}}``), describes itself
    by the class attributes below, which `describe` reads into a `Descriptor` when the
    workflow plans, so its module is imported then: keep torch out of its top level (import it
    in fit and sample) and planning imports no torch for it."""

    settings: ClassVar[type[Section]]  # its settings section: a frozen `Section` dataclass
    label: ClassVar[str | None] = None  # its Table 1 row (none: the config key)
    trains_from_scratch: ClassVar[bool] = False
    samples_at_fit: ClassVar[bool] = False
    members: ClassVar[bool] = False
    batched_fit: ClassVar[bool] = False
    variants: ClassVar[tuple[str, ...]] = VARIANTS
    sampling_keys: ClassVar[tuple[str, ...]] = ()
    prediction_keys: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def fit(
        self, problem: Problem, mode: Mode, settings: Section, seed: int, count: int | None
    ) -> Fitted:
        raise NotImplementedError(f"{type(self).__name__} does not define fit")

    def fit_modes(
        self,
        problem: Problem,
        modes: list[Mode],
        settings: Section,
        seeds: list[int],
        counts: list[int | None],
    ) -> list[Fitted]:
        """`fit` at each of `modes` with its seed and count, in order."""
        return [
            self.fit(problem, mode, settings, seed, count)
            for mode, seed, count in zip(modes, seeds, counts, strict=True)
        ]

    @abstractmethod
    def sample(
        self, problem: Problem, fitted: Fitted, count: int, settings: Section, seed: int
    ) -> dict[str, torch.Tensor]:
        raise NotImplementedError(f"{type(self).__name__} does not define sample")


class BatchedMethod(Method):
    """A method that fits a block of modes in one batched run: subclass it and define
    `fit_modes` (and `sample`); its `fit` is `fit_modes` at one mode."""

    batched_fit: ClassVar[bool] = True

    def fit(
        self, problem: Problem, mode: Mode, settings: Section, seed: int, count: int | None
    ) -> Fitted:
        """`fit_modes` at one mode."""
        return self.fit_modes(problem, [mode], settings, [seed], [count])[0]

    @abstractmethod
    def fit_modes(
        self,
        problem: Problem,
        modes: list[Mode],
        settings: Section,
        seeds: list[int],
        counts: list[int | None],
    ) -> list[Fitted]:
        raise NotImplementedError(f"{type(self).__name__} does not define fit_modes")


def describe(name: str, path: str, cls: Any) -> Descriptor:
    """The descriptor of the class ``cls`` that the configuration names by ``path`` under the
    method key ``name``; ValueError naming the path and what is wrong."""
    where = f"method {path!r}"
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise ValueError(f"{where} is not a subclass of symbnn.methods.interface.Method")
    settings = getattr(cls, "settings", None)
    if not (isinstance(settings, type) and issubclass(settings, Section)):
        raise ValueError(
            f"{where}: its class attribute `settings` must be a Section subclass (a frozen "
            f"dataclass of symbnn.settings), got {settings!r}"
        )
    for attribute in ("fit", "sample"):
        if getattr(cls, attribute) is getattr(Method, attribute):
            # the step was once called draw: say so to a class written for that interface
            renamed = " (its draw is now called sample)" if hasattr(cls, "draw") else ""
            raise ValueError(f"{where} does not define {attribute}{renamed}")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise ValueError(f"{where} does not define {missing}")
    for attribute, arguments in STEPS.items():
        _check_step(where, cls, attribute, arguments)
    try:
        return Descriptor(
            name=name,
            label=str(cls.label or name),
            settings=settings,
            implementation=path,
            trains_from_scratch=bool(cls.trains_from_scratch),
            samples_at_fit=bool(cls.samples_at_fit),
            members=bool(cls.members),
            batched_fit=bool(cls.batched_fit),
            variants=tuple(cls.variants),
            sampling_keys=tuple(cls.sampling_keys),
            prediction_keys=tuple(cls.prediction_keys),
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None


# the arguments symbnn calls each step of a method with (after self)
STEPS = {
    "fit": ("problem", "mode", "settings", "seed", "count"),
    "fit_modes": ("problem", "modes", "settings", "seeds", "counts"),
    "sample": ("problem", "fitted", "count", "settings", "seed"),
}


def _check_step(where: str, cls: type, attribute: str, arguments: tuple[str, ...]) -> None:
    """ValueError unless ``cls.attribute`` is a function that takes ``arguments``
    positionally (read from its signature; nothing is called)."""
    step = inspect.getattr_static(cls, attribute, None)
    if isinstance(step, staticmethod | classmethod) or not inspect.isfunction(step):
        raise ValueError(
            f"{where}: {attribute} must be a method {attribute}(self, {', '.join(arguments)})"
        )
    try:
        inspect.signature(step).bind(None, *arguments)
    except TypeError as exc:
        raise ValueError(
            f"{where}: {attribute} cannot be called as {attribute}(self, {', '.join(arguments)}): "
            f"{exc}"
        ) from None
