"""What the workflow needs to plan a method (no torch here): its `Descriptor`, and how a
variant's samples split among the modes (`Draw`, `split_counts`).

A descriptor says a method's name (config key and results folder), label (its Table 1 row),
settings section, how its samples are drawn (`samples_at_fit`, `members`, `variants`), which
settings only the draws or the predictions read, whether its fit trains a network of its own
that must pass the pool's acceptance rule (`trains_from_scratch`), whether it fits a block of
modes in one batched run (`batched_fit`), and the import path of its implementation. Every
method, shipped or the user's own, describes itself by the class attributes of its
`symbnn.methods.interface.Method` subclass, which `symbnn.methods.interface.describe` reads
into a descriptor. It lives in the settings layer because the settings check a configuration
with it (the pool a method's replicates take) and import nothing above themselves.

`Descriptor.sample_plan` splits a variant's samples among the modes (or members); the workflow
plans one fit job per block of modes (`Descriptor.mode_blocks`) and one sample job per variant
from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from symbnn.settings.base import Section


class Counts(Protocol):
    """The counts of an experiment's `methods` section a plan reads
    (`symbnn.settings.methods.Methods`; a protocol here, since that module imports this one)."""

    n_samples: int
    modes: int
    replicates: int
    fit_block: int | None

    @property
    def window(self) -> int: ...


def members_span(methods: Counts, stride: int) -> int:
    """Converged pool networks that `methods.replicates` replicates of `n_samples` members
    each take, consecutive replicates starting `stride` networks apart."""
    return (methods.replicates - 1) * stride + methods.n_samples


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

    def sample_plan(self, variant: str, methods: Counts, settings: Section) -> list[Draw]:
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

    def stride(self, methods: Counts, settings: Section) -> int:
        """Pool networks between the first members of consecutive replicates."""
        return getattr(settings, "stride", None) or methods.n_samples

    def members_needed(self, methods: Counts, settings: Section) -> int:
        """Converged pool networks the method's replicates take (its modes, or its members)."""
        if not self.members:
            return methods.modes
        return members_span(methods, self.stride(methods, settings))

    def fit_counts(self, methods: Counts, settings: Section) -> list[int]:
        """Samples each mode's fit draws when the method samples while fitting: the most any
        variant takes from that mode (the others take a prefix)."""
        need: dict[int, int] = {}
        for variant in self.variants:
            for draw in self.sample_plan(variant, methods, settings):
                need[draw.mode] = max(need.get(draw.mode, 0), draw.skip + draw.count)
        return [need.get(mode, 0) for mode in range(max(need) + 1)]

    def mode_blocks(
        self, methods: Counts, settings: Section, batched: bool = False
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
