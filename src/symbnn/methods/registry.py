"""Which methods exist, their variants, and how a variant's samples split among its modes.

No torch here: the Snakefile reads it to plan jobs, and every `snakemake` start would pay
for the import."""

from __future__ import annotations

import importlib
import typing
from dataclasses import dataclass
from types import ModuleType

from symbnn.settings import Methods, Section
from symbnn.settings.base import type_hints

# method name (config key) -> module holding its `fit` and `draw`; imported only when used,
# so e.g. laplace-torch loads only in Laplace jobs
MODULES = {
    "dropout": "symbnn.methods.dropout",
    "bnn": "symbnn.methods.bnn",
    "sghmc": "symbnn.methods.sghmc",
    "swag": "symbnn.methods.swag",
    "laplace": "symbnn.methods.laplace",
    "de": "symbnn.methods.ensembles",
}
METHOD_NAMES = tuple(MODULES)
# methods whose samples come out of their fit (a chain, fixed members, or laplace-torch's
# posterior, which is not stored): their sample counts are fit settings. Their draws are
# prefix-stable (the first c samples of a fit that drew n >= c are those a fit drawing c
# would give), so one fit per mode serves both variants.
SAMPLES_AT_FIT = ("sghmc", "laplace", "de")
# methods that train their own network from scratch at a mode's seed: it must converge as
# the target's networks do (fresh seeds are tried, `methods.retries`)
TRAINS_FROM_SCRATCH = ("dropout", "bnn")
LABELS = {
    "dropout": "MC Dropout",
    "bnn": "BNN",
    "sghmc": "SGHMC",
    "swag": "SWAG",
    "laplace": "Laplace",
    "de": "Deep Ensembles",
}


def split_counts(n_samples: int, n_modes: int) -> list[int]:
    """Samples per mode: as equal as possible, the first modes taking the remainder."""
    if n_modes < 1 or n_samples < n_modes:
        raise ValueError(
            f"cannot split {n_samples} samples among {n_modes} modes "
            "(need at least one sample per mode)"
        )
    base, extra = divmod(n_samples, n_modes)
    return [base + (k < extra) for k in range(n_modes)]


def check_method(method: str) -> str:
    if method not in MODULES:
        raise ValueError(f"unknown method {method!r} (known: {', '.join(METHOD_NAMES)})")
    return method


def variants(method: str) -> tuple[str, ...]:
    """Deep Ensembles are multi-mode by construction; every other method has both variants."""
    return ("multi",) if check_method(method) == "de" else ("single", "multi")


def check_variant(method: str, variant: str) -> str:
    if variant not in variants(method):
        raise ValueError(
            f"method {method!r} has no variant {variant!r} (it has: {', '.join(variants(method))})"
        )
    return variant


def configured_methods(methods: Methods) -> list[str]:
    """The methods an experiment's `methods` section turns on, in registry order."""
    return [name for name in METHOD_NAMES if getattr(methods, name) is not None]


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


def draw_plan(method: str, variant: str, methods: Methods) -> list[Draw]:
    """Which samples a variant draws from which mode, unit by unit.

    - single: at each of the `modes` modes, all n_samples (one single-mode posterior per mode,
      reported over the modes);
    - multi: `replicates` multi-mode posteriors; replicate r splits the n_samples among
      `modes_per_replicate` consecutive modes starting at mode r (cyclically), so every mode
      serves the same number of replicates and each replicate draws from its own subset;
    - Deep Ensembles: replicate r is `n_samples` consecutive converged pool networks starting
      at r * `de.stride` (disjoint replicates when the stride is n_samples)."""
    check_variant(method, variant)
    n, k = methods.n_samples, methods.modes
    if method == "de":
        stride = (methods.de.stride if methods.de is not None else None) or n
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


def fit_counts(method: str, methods: Methods) -> list[int]:
    """Samples each mode's fit draws when the method samples while fitting: the most any
    variant takes from that mode (the others take a prefix)."""
    need: dict[int, int] = {}
    for variant in variants(method):
        for draw in draw_plan(method, variant, methods):
            need[draw.mode] = max(need.get(draw.mode, 0), draw.skip + draw.count)
    return [need.get(mode, 0) for mode in range(max(need) + 1)]


def mode_blocks(method: str, methods: Methods) -> list[list[int]]:
    """The mode indices each fit job handles: one job per mode for the methods that fit, one
    for every Deep Ensemble member (they only copy weights)."""
    n_modes = len(fit_counts(method, methods))
    return [list(range(n_modes))] if method == "de" else [[k] for k in range(n_modes)]


def settings_of(method: str, methods: Methods) -> Section:
    """The method's settings section (the method must be configured)."""
    section = getattr(methods, check_method(method))
    if section is None:
        raise ValueError(f"methods.{method} is not configured for this experiment")
    return section


def settings_class(method: str) -> type[Section]:
    """The settings section of a method (``Methods.<method>`` is ``Section | None``)."""
    hint = type_hints(Methods)[check_method(method)]
    return next(arm for arm in typing.get_args(hint) if arm is not type(None))


def module(method: str) -> ModuleType:
    return importlib.import_module(MODULES[check_method(method)])


def samples_at_fit(method: str) -> bool:
    return check_method(method) in SAMPLES_AT_FIT


def fit_settings(method: str, methods: Methods) -> dict:
    """The settings a method's fit reads (sampling- and prediction-only keys left out): its
    rule's params."""
    return _settings_less(method, methods, "SAMPLING_KEYS", "PREDICTION_KEYS")


def draw_settings(method: str, methods: Methods) -> dict:
    """The settings a method's draw reads: all but the prediction-only ones."""
    return _settings_less(method, methods, "PREDICTION_KEYS")


def _settings_less(method: str, methods: Methods, *later: str) -> dict:
    """The method's settings without the keys its section lists in the `later` attributes
    (SAMPLING_KEYS: read only when drawing; PREDICTION_KEYS: only when predicting)."""
    section = settings_of(method, methods)
    left_out = {key for name in later for key in getattr(type(section), name, ())}
    return {k: v for k, v in section.to_dict().items() if k not in left_out}


def predictive(method: str, methods: Methods) -> str:
    """How the metrics predict with the method's samples: "sampled" (each sample's network as
    is) unless the method's settings say "linearised" (at the sample's mode)."""
    return getattr(settings_of(method, methods), "predictive", "sampled")
