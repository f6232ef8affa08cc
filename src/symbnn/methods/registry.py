"""Which methods exist, their variants, and how a variant's samples split among its modes."""

from __future__ import annotations

import importlib
from typing import Any

from symbnn.methods.base import SampleMode, split_counts

# method name (config key) -> module holding its `sample_mode`; imported only when used,
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
LABELS = {
    "dropout": "MC Dropout",
    "bnn": "BNN",
    "sghmc": "SGHMC",
    "swag": "SWAG",
    "laplace": "Laplace",
    "de": "Deep Ensembles",
}
# settings that configure the sampling as a whole, not one method
COMMON_KEYS = ("n_samples", "modes", "pool", "first_seed", "seed", "predict_batch")


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


def configured_methods(methods_cfg: dict[str, Any]) -> list[str]:
    """The methods an experiment's `methods` section turns on, in registry order."""
    return [name for name in METHOD_NAMES if name in methods_cfg]


def mode_shares(method: str, variant: str, methods_cfg: dict[str, Any]) -> list[int]:
    """Samples drawn from each mode: all from mode 0 (single), split among `modes` modes
    (multi), or one per member (Deep Ensembles)."""
    check_variant(method, variant)
    n = methods_cfg["n_samples"]
    if method == "de":
        return [1] * n
    return [n] if variant == "single" else split_counts(n, methods_cfg["modes"])


def settings_of(method: str, methods_cfg: dict[str, Any]) -> dict[str, Any]:
    return dict(methods_cfg.get(check_method(method)) or {})


def sampler(method: str) -> SampleMode:
    return importlib.import_module(MODULES[check_method(method)]).sample_mode
