"""Checking a method's settings: DEFAULTS overridden by the config's values, each value
validated, every error naming the key as the config spells it ("swag.lr must be > 0")."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def merged(
    method: str, defaults: Mapping[str, Any], settings: Mapping[str, Any] | None
) -> dict[str, Any]:
    """`defaults` updated with `settings`; an unknown key raises ValueError naming it."""
    settings = {} if settings is None else settings
    if not isinstance(settings, Mapping):
        raise ValueError(f"{method} settings must be a mapping, got {type(settings).__name__}")
    unknown = sorted(set(settings) - set(defaults), key=str)
    if unknown:
        raise ValueError(
            f"{method}.{unknown[0]} is not a setting (known: {', '.join(sorted(defaults))})"
        )
    return {**defaults, **settings}


def number(
    method: str,
    key: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """A finite real number within [low, high] (either end open when asked)."""
    # bool is an int subclass: a YAML `true` where a number belongs is a mistake
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{method}.{key} must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{method}.{key} must be finite, got {value!r}")
    too_low = low is not None and (x <= low if low_open else x < low)
    too_high = high is not None and (x >= high if high_open else x > high)
    if too_low or too_high:
        if high is None:
            bound = f"be {'>' if low_open else '>='} {low:g}"
        elif low is None:
            bound = f"be {'<' if high_open else '<='} {high:g}"
        else:
            bound = f"lie in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise ValueError(f"{method}.{key} must {bound}, got {value!r}")
    return x


def integer(method: str, key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{method}.{key} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{method}.{key} must be >= {minimum}, got {value!r}")
    return int(value)


def boolean(method: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{method}.{key} must be true or false, got {value!r}")
    return value


def choice(method: str, key: str, value: Any, options: tuple[str, ...]) -> str:
    if value not in options:
        raise ValueError(f"{method}.{key} must be one of {', '.join(options)}; got {value!r}")
    return value


def sample_count(method: str, count: Any) -> int:
    """The number of samples a sampler is asked for: a positive integer."""
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ValueError(f"{method}: count must be a positive integer, got {count!r}")
    return int(count)
