"""Which methods exist, their variants, and how a variant's samples split among its modes."""

from __future__ import annotations

import importlib
import typing
from types import ModuleType

from symbnn.methods.base import split_counts
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
# posterior, which is not stored): their sample counts are fit settings
SAMPLES_AT_FIT = ("sghmc", "laplace", "de")
LABELS = {
    "dropout": "MC Dropout",
    "bnn": "BNN",
    "sghmc": "SGHMC",
    "swag": "SWAG",
    "laplace": "Laplace",
    "de": "Deep Ensembles",
}


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


def mode_shares(method: str, variant: str, methods: Methods) -> list[int]:
    """Samples drawn from each mode: all from mode 0 (single), split among `modes` modes
    (multi), or one per member (Deep Ensembles)."""
    check_variant(method, variant)
    n = methods.n_samples
    if method == "de":
        return [1] * n
    return [n] if variant == "single" else split_counts(n, methods.modes)


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
    """The settings a method's fit reads (sampling-only keys left out): its rule's params."""
    section = settings_of(method, methods)
    sampling = getattr(type(section), "SAMPLING_KEYS", ())
    return {k: v for k, v in section.to_dict().items() if k not in sampling}
