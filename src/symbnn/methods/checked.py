"""A method's steps as the workflow runs them: a method of the user's own that raises is told
as one line naming the method, its class, the step and the modes
("method 'mine' (usermods:Raising) failed in fit on mode 3: RuntimeError: ..."), its own
traceback kept as the cause (`symbnn.user_code`); and every method's samples are checked
before anything is written: the model's state names, each tensor's dtype and shape with the
count asked for, finite values.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from symbnn import user_code
from symbnn.methods.interface import Descriptor
from symbnn.methods.registry import is_shipped
from symbnn.models import build_model


def label(method: Descriptor) -> str:
    """ "method 'NAME'", and the import path of a method of the user's own."""
    where = f"method {method.name!r}"
    return where if is_shipped(method) else f"{where} ({method.implementation})"


def _modes(modes: Sequence[int]) -> str:
    return f"mode {modes[0]}" if len(modes) == 1 else f"modes {list(modes)}"


@contextlib.contextmanager
def step(method: Descriptor, name: str, modes: Sequence[int]) -> Iterator[None]:
    """Run the method's step ``name`` ("fit", "sample") at ``modes`` in the block: what a
    user's method raises is a `symbnn.user_code.UserCodeError` naming it; a shipped
    method's errors are passed on as they are (its traceback is symbnn's to read)."""
    if is_shipped(method):
        yield
        return
    with user_code.calling(label(method), f"in {name} on {_modes(modes)}"):
        yield


def model_layout(model_spec: dict[str, Any]) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Name -> (shape, dtype) of every tensor of the model's state dict, built on the meta
    device (no memory, no random numbers drawn)."""
    with torch.device("meta"):
        state = build_model(model_spec).state_dict()
    return {name: (tuple(t.shape), t.dtype) for name, t in state.items()}


def check_samples(
    method: Descriptor,
    drawn: Any,
    count: int,
    layout: dict[str, tuple[tuple[int, ...], torch.dtype]],
    mode: int,
) -> dict[str, torch.Tensor]:
    """``drawn`` (what the method's `sample` returned at ``mode``) when it is ``count``
    samples of the model: its state names (put in the model's order), each tensor of shape
    (count, *shape) and the model's dtype, float values finite. ValueError naming the method,
    the mode and the tensor at fault otherwise."""
    where = f"{label(method)}: sample on mode {mode}"
    if not isinstance(drawn, dict):
        raise ValueError(f"{where} returned a {type(drawn).__name__}, not a dict of tensors")
    missing = [name for name in layout if name not in drawn]
    extra = [str(name) for name in drawn if name not in layout]
    if missing or extra:
        raise ValueError(
            f"{where} returned other tensors than the model's state dict (missing: "
            f"{', '.join(missing[:5]) or '-'}; unexpected: {', '.join(extra[:5]) or '-'})"
        )
    for name, (shape, dtype) in layout.items():
        tensor = drawn[name]
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(f"{where} returned a {type(tensor).__name__} for {name}, not a tensor")
        if tuple(tensor.shape) != (count, *shape) or tensor.dtype != dtype:
            raise ValueError(
                f"{where} returned {name} of shape {tuple(tensor.shape)} and dtype "
                f"{tensor.dtype}; {count} samples of the model are {(count, *shape)}, {dtype}"
            )
        if tensor.is_floating_point():
            bad = int((~torch.isfinite(tensor)).sum())
            if bad:
                raise ValueError(
                    f"{where} returned {bad} of {tensor.numel()} values of {name} that are "
                    "NaN or infinite"
                )
    return {name: drawn[name] for name in layout}
