"""Sub-commands of the `symbnn` CLI: one module each, each defining ``register(subparsers)``
that adds its parser and sets ``handler`` (a function of the parsed args returning an exit code).

Below: argparse ``type=`` checks shared by the commands, so that an out-of-bounds option value
is a usage error naming the option and the value, not a traceback or a silent result. An option
that mirrors a setting takes its type, bounds, choices and default from the settings layer
(`setting_option`), so the command line and config.yaml accept the same values."""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from typing import Any, Literal

from symbnn.device import resolve_device
from symbnn.settings.base import ConfigError, Section, parse_value, type_hints


def positive_float(text: str) -> float:
    """A finite number > 0 (tolerances, sizes)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number > 0")
    return value


def _integer(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= {low}")
    return value


def positive_int(text: str) -> int:
    return _integer(text, 1)


def nonnegative_int(text: str) -> int:
    return _integer(text, 0)


def available_device(name: str) -> str:
    """``name`` resolved ("auto" -> cuda or cpu); ValueError naming it when it names a GPU
    that torch cannot see."""
    import torch

    resolved = resolve_device(name)
    if resolved.startswith("cuda:"):
        index, count = int(resolved.split(":")[1]), torch.cuda.device_count()
        if index >= count:
            raise ValueError(f"--device {name}: only {count} CUDA device(s) are visible")
    return resolved


class SettingType:
    """argparse ``type=`` of an option mirroring setting ``section.name``: the text parsed and
    bounded as the settings layer parses the key (a wrong value is a usage error naming the
    option, with the settings layer's reason)."""

    def __init__(self, section: type[Section], name: str) -> None:
        self.section, self.name = section, name
        self.hint = _without_none(type_hints(section)[name])
        self.meta = _field(section, name).metadata
        self.__name__ = f"{section.__name__}.{name}"  # argparse's messages name the type so

    def __call__(self, text: str) -> Any:
        try:
            return parse_value(self.hint, text, self.name, self.meta)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{self.name}: ")) from None


def setting_option(section: type[Section], name: str, **keywords: Any) -> dict[str, Any]:
    """Keywords of `add_argument` for an option that mirrors the setting ``section.name``:
    ``type`` (`SettingType`) or ``choices`` (a Literal; ``nargs="+"`` for a tuple of them)
    and the setting's ``default`` (none when the setting is required); ``keywords`` are added
    (e.g. ``help``). The seed of flags generated from the settings layer."""
    hint = _without_none(type_hints(section)[name])
    option: dict[str, Any] = {}
    if typing.get_origin(hint) is tuple:
        option["nargs"] = "+"
        hint = typing.get_args(hint)[0]
        if typing.get_origin(hint) is not Literal:
            raise TypeError(f"{section.__name__}.{name}: only lists of choices become options")
    if typing.get_origin(hint) is Literal:
        option["choices"] = typing.get_args(hint)
    elif hint is not str or _field(section, name).metadata.get("pattern"):
        option["type"] = SettingType(section, name)
    try:
        default = section.default(name)
    except KeyError:  # required setting: no default
        return {**option, **keywords}
    option["default"] = list(default) if option.get("nargs") else default
    return {**option, **keywords}


def _field(section: type[Section], name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(section) if f.name == name)


def _without_none(hint: Any) -> Any:
    """``X | None`` -> X (an option left out is the None)."""
    arms = [arm for arm in typing.get_args(hint) if arm is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(arms) == 1:
        return arms[0]
    return hint
