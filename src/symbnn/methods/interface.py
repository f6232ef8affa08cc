"""The method interface, in two layers.

- `Descriptor` (no torch here): what the workflow needs to plan a method's jobs: its name
  (config key and results folder), label (its Table 1 row), settings section, how its samples
  are drawn (`samples_at_fit`, `members`, `variants`), which settings only the draws or the
  predictions read, whether its fit trains a network of its own that must pass the pool's
  acceptance rule (`trains_from_scratch`), whether it fits a block of modes in one batched
  run (`batched_fit`), and the import path of its implementation. The
  shipped methods' descriptors sit beside their settings (`symbnn.settings.methods.SHIPPED`);
  a method of the user's own describes itself by the class attributes of `Method`.
- `Method`: the implementation, loaded only inside jobs: `fit` at one mode (`fit_modes` at
  a block of them), `sample` draws samples from a fit (`symbnn.methods.base` has the Problem and Mode
  they take).

`Descriptor.sample_plan` splits a variant's samples among the modes (or members); the Snakefile
plans one fit job per block of modes (`Descriptor.mode_blocks`) and one sample job per variant
from it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # the settings import this module: no import of them at run time
    from symbnn.settings.base import Section
    from symbnn.settings.methods import Methods

VARIANTS = ("single", "multi")


def split_counts(n_samples: int, n_modes: int) -> list[int]:
    """Samples per mode: as equal as possible, the first modes taking the remainder."""
    if n_modes < 1 or n_samples < n_modes:
        raise ValueError(
            f"cannot split {n_samples} samples among {n_modes} modes "
            "(need at least one sample per mode)"
        )
    base, extra = divmod(n_samples, n_modes)
    return [base + (k < extra) for k in range(n_modes)]


@dataclass(frozen=True)
class Draw:
    """One mode's part of a variant's samples: `count` samples from the fit at `mode`, for
    reporting `unit` (the mode itself for a one-mode variant, the replicate for a multi-mode
    one). `skip`: samples of this mode's fit that earlier units already took; a method whose
    samples come out of its fit takes the next ones, so replicates never share a sample."""

    mode: int
    count: int
    unit: int
    skip: int = 0


@dataclass(frozen=True)
class Descriptor:
    """How the workflow plans a method (see the module's docstring).

    - trains_from_scratch: its fit trains a network of its own from the mode's seed and keeps
      it only if it passes the pool's acceptance threshold, retrying fresh seeds
      (`methods.retries`): its fit reads the acceptance rule;
    - samples_at_fit: its samples come out of its fit (a chain, fixed members, a posterior
      that is not stored), prefix-stable (the first c samples of a fit drawing n >= c are
      those a fit drawing c gives): the sample counts are fit settings, one fit per mode
      serves both variants;
    - members: a sample is one converged pool network as trained (Deep Ensembles): replicate
      r takes n_samples consecutive members from r * stride (its settings' `stride`, none:
      n_samples), one sample per member, all members fitted by one job;
    - batched_fit: its `Method.fit_modes` fits a block of modes in one batched run where the
      model has a hand-written stacked pass, each mode's fit the same as alone: the workflow
      then fits all modes in one job (`methods.fit_block` splits them), else one job a mode;
    - sampling_keys / prediction_keys: settings read only when drawing / predicting (changing
      them redraws the samples / repredicts, and refits nothing)."""

    name: str
    label: str
    settings: type[Section]
    implementation: str
    trains_from_scratch: bool = False
    samples_at_fit: bool = False
    members: bool = False
    batched_fit: bool = False
    variants: tuple[str, ...] = VARIANTS
    sampling_keys: tuple[str, ...] = ()
    prediction_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        where = f"method {self.name!r}"
        if not self.variants or not set(self.variants) <= set(VARIANTS):
            raise ValueError(f"{where}: variants must be some of {VARIANTS}, got {self.variants}")
        if self.members and (self.variants != ("multi",) or not self.samples_at_fit):
            raise ValueError(
                f"{where}: a method whose samples are pool members is multi-mode only and "
                "draws its samples in its fit (variants ('multi',), samples_at_fit)"
            )
        fields = set(getattr(self.settings, "__dataclass_fields__", ()))
        unknown = sorted((set(self.sampling_keys) | set(self.prediction_keys)) - fields)
        if unknown:
            raise ValueError(f"{where}: {unknown} are not settings of {self.settings.__name__}")

    def check_variant(self, variant: str) -> str:
        if variant not in self.variants:
            raise ValueError(
                f"method {self.name!r} has no variant {variant!r} "
                f"(it has: {', '.join(self.variants)})"
            )
        return variant

    def sample_plan(self, variant: str, methods: Methods, settings: Section) -> list[Draw]:
        """Which samples a variant draws from which mode, unit by unit.

        - single: at each of the `modes` modes, all n_samples (one single-mode posterior per
          mode, reported over the modes);
        - multi: `replicates` multi-mode posteriors; replicate r splits the n_samples among
          `modes_per_replicate` consecutive modes starting at mode r (cyclically), so every
          mode serves the same number of replicates and each replicate draws from its own
          subset;
        - members: replicate r is `n_samples` consecutive converged pool networks starting at
          r * stride (disjoint replicates when the stride is n_samples)."""
        self.check_variant(variant)
        n, k = methods.n_samples, methods.modes
        if self.members:
            stride = self.stride(methods, settings)
            return [Draw(r * stride + j, 1, r) for r in range(methods.replicates) for j in range(n)]
        if variant == "single":
            return [Draw(mode, n, mode) for mode in range(k)]
        used = [0] * k
        plan = []
        for r in range(methods.replicates):
            window = [(r + j) % k for j in range(methods.window)]
            for mode, count in zip(window, split_counts(n, len(window))):
                plan.append(Draw(mode, count, r, used[mode]))
                used[mode] += count
        return plan

    def stride(self, methods: Methods, settings: Section) -> int:
        """Pool networks between the first members of consecutive replicates."""
        return getattr(settings, "stride", None) or methods.n_samples

    def members_needed(self, methods: Methods, settings: Section) -> int:
        """Converged pool networks the method's replicates take (its modes, or its members)."""
        if not self.members:
            return methods.modes
        return (methods.replicates - 1) * self.stride(methods, settings) + methods.n_samples

    def fit_counts(self, methods: Methods, settings: Section) -> list[int]:
        """Samples each mode's fit draws when the method samples while fitting: the most any
        variant takes from that mode (the others take a prefix)."""
        need: dict[int, int] = {}
        for variant in self.variants:
            for draw in self.sample_plan(variant, methods, settings):
                need[draw.mode] = max(need.get(draw.mode, 0), draw.skip + draw.count)
        return [need.get(mode, 0) for mode in range(max(need) + 1)]

    def mode_blocks(
        self, methods: Methods, settings: Section, batched: bool = False
    ) -> list[list[int]]:
        """The mode indices each fit job handles: one job for every member (they only copy
        weights); blocks of `methods.fit_block` modes (none: all) for a method that fits in a
        batch when the model trains `batched` (`symbnn.methods.registry.batched_fits`); else
        one job per mode."""
        n_modes = len(self.fit_counts(methods, settings))
        if self.members:
            return [list(range(n_modes))]
        if self.batched_fit and batched:
            size = methods.fit_block or n_modes
            return [list(range(s, min(s + size, n_modes))) for s in range(0, n_modes, size)]
        return [[k] for k in range(n_modes)]

    def predictive(self, settings: Section) -> str:
        """How the metrics predict with the samples: "sampled" (each sample's network as is)
        unless the settings say "linearised" (at the sample's mode)."""
        return getattr(settings, "predictive", "sampled")

    def settings_less(self, settings: Section, *, sampling: bool) -> dict[str, Any]:
        """The settings without the prediction-only keys, and with ``sampling`` without the
        sampling-only ones too (what a fit reads)."""
        left_out = set(self.prediction_keys) | (set(self.sampling_keys) if sampling else set())
        return {k: v for k, v in settings.to_dict().items() if k not in left_out}


class Method:
    """A posterior approximation's implementation: subclass it and define `fit` and `sample`.

    ``fit(problem, mode, settings, seed, count)`` learns what the method needs at one mode
    (`symbnn.methods.base.Problem` and `Mode`) and returns it as tensors, numbers and strings
    in dicts and lists (saved as a safetensors tree by `symbnn.treefile`, never pickled);
    ``count`` is the number of samples the fit must draw when ``samples_at_fit`` (else None).
    ``fit_modes(problem, modes, settings, seeds, counts)`` fits a block of modes (by default
    one `fit` after another); a `BatchedMethod` fits them in one batched run, each mode's
    fit what `fit` gives it alone.
    ``sample(problem, fitted, count, settings, seed)`` returns ``count`` samples, a stacked
    state dict of the experiment's model: name -> (count, *shape).

    A class named by import path in config.yaml (``methods: {mine: {class:
    "package.module:Mine", ...}}``) also describes itself by the class attributes below,
    which symbnn reads into a `Descriptor` when it plans the workflow, so its module is imported
    then: keep torch out of its top level (import it in fit and sample) and planning imports no
    torch for it. A shipped method's descriptor (`symbnn.settings.methods.SHIPPED`) describes
    it instead."""

    settings: ClassVar[type[Section]]  # its settings section: a frozen `Section` dataclass
    label: ClassVar[str | None] = None  # its Table 1 row (none: the config key)
    trains_from_scratch: ClassVar[bool] = False
    samples_at_fit: ClassVar[bool] = False
    members: ClassVar[bool] = False
    batched_fit: ClassVar[bool] = False
    variants: ClassVar[tuple[str, ...]] = VARIANTS
    sampling_keys: ClassVar[tuple[str, ...]] = ()
    prediction_keys: ClassVar[tuple[str, ...]] = ()

    def fit(self, problem: Any, mode: Any, settings: Any, seed: int, count: int | None) -> dict:
        raise NotImplementedError(f"{type(self).__name__} does not define fit")

    def fit_modes(
        self,
        problem: Any,
        modes: list[Any],
        settings: Any,
        seeds: list[int],
        counts: list[int | None],
    ) -> list[dict]:
        """`fit` at each of `modes` with its seed and count, in order."""
        return [
            self.fit(problem, mode, settings, seed, count)
            for mode, seed, count in zip(modes, seeds, counts, strict=True)
        ]

    def sample(self, problem: Any, fitted: dict, count: int, settings: Any, seed: int) -> dict:
        raise NotImplementedError(f"{type(self).__name__} does not define sample")


class BatchedMethod(Method):
    """A method that fits a block of modes in one batched run: subclass it and define
    `fit_modes` (and `sample`); its `fit` is `fit_modes` at one mode."""

    batched_fit: ClassVar[bool] = True

    def fit(self, problem: Any, mode: Any, settings: Any, seed: int, count: int | None) -> dict:
        """`fit_modes` at one mode."""
        return self.fit_modes(problem, [mode], settings, [seed], [count])[0]

    def fit_modes(
        self,
        problem: Any,
        modes: list[Any],
        settings: Any,
        seeds: list[int],
        counts: list[int | None],
    ) -> list[dict]:
        raise NotImplementedError(f"{type(self).__name__} does not define fit_modes")


def describe(name: str, path: str, cls: Any) -> Descriptor:
    """The descriptor of the class ``cls`` that the configuration names by ``path`` under the
    method key ``name``; ValueError naming the path and what is wrong."""
    from symbnn.settings.base import Section

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
