"""Sub-commands of the `symbnn` CLI: one module each, each defining ``register(subparsers)``
that adds its parser and sets ``handler`` (a function of the parsed args returning an exit code).

Below: argparse ``type=`` checks shared by the commands, so that an out-of-bounds option value
is a usage error naming the option and the value, not a traceback or a silent result."""

from __future__ import annotations

import argparse
import math
import re

DEVICE = re.compile(r"cpu|cuda(:\d+)?")


def positive_float(text: str) -> float:
    """A finite number > 0 (tolerances, sizes)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number > 0")
    return value


def probability(text: str) -> float:
    """A number strictly between 0 and 1 (a test's level)."""
    value = positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number between 0 and 1")
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


def device(text: str) -> str:
    """cpu, cuda or cuda:N (whether that GPU exists is checked when the command runs)."""
    if not DEVICE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a device (use cpu, cuda or cuda:N)")
    return text


def device_or_auto(text: str) -> str:
    """auto (a GPU when one is visible, else the CPU), cpu, cuda or cuda:N."""
    if text != "auto" and not DEVICE.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a device (use auto, cpu, cuda or cuda:N)"
        )
    return text


def available_device(name: str) -> str:
    """``name`` resolved ("auto" -> cuda or cpu); ValueError naming it when it names a GPU
    that torch cannot see."""
    import torch

    from symbnn.device import resolve_device

    resolved = resolve_device(name)
    if resolved.startswith("cuda:"):
        index, count = int(resolved.split(":")[1]), torch.cuda.device_count()
        if index >= count:
            raise ValueError(f"--device {name}: only {count} CUDA device(s) are visible")
    return resolved
