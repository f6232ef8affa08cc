"""Models of the user's own, named in a spec by import path.

``{"name": "package.module:attribute", "options": {...}, "input_shape": [C, H, W]}``: the
attribute (a class or a function; dots walk nested attributes) is called with ``options`` as
keyword arguments and must return an ``nn.Module``. ``input_shape`` is the shape of one input,
used only to trace the model when its symmetry structure is derived (`example_input`).

Only a trusted path is imported (`symbnn.trust`): one the configuration, the command line
(``--trust-model``) or the calling code named, never one read from a store or a result.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from symbnn import trust

SPEC_KEYS = ("name", "options", "input_shape")


def resolve(path: str) -> Any:
    """The class or function ``package.module:attribute`` names; a clear error when it is
    missing, and `symbnn.trust.UntrustedImport` (nothing imported) when nobody trusted it."""
    target = trust.import_object("model", path)
    if not callable(target):
        raise ValueError(f"model {path!r}: {path.partition(':')[2]!r} is not a class or function")
    return target


def build_imported(spec: dict[str, Any]) -> nn.Module:
    """Call the spec's class or function with its options; the result must be a module."""
    path = spec["name"]
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise ValueError(
            f"model {path!r}: unknown spec keys {unknown} (a model named by import path takes "
            f"{', '.join(SPEC_KEYS)}; constructor arguments go under 'options')"
        )
    options = dict(spec.get("options") or {})
    try:
        model = resolve(path)(**options)
    except TypeError as exc:
        raise ValueError(f"bad options for model {path!r}: {exc}") from exc
    if not isinstance(model, nn.Module):
        raise ValueError(f"model {path!r} returned {type(model).__name__}, not an nn.Module")
    return model


def example_input(spec: dict[str, Any], model: nn.Module) -> torch.Tensor | None:
    """Two inputs of the spec's ``input_shape``, matching the model's dtype and device; None
    when the spec has none (the tracer then guesses from the first layer)."""
    shape = spec.get("input_shape")
    if not shape:
        return None
    p = next((p for p in model.parameters() if p.is_floating_point()), None)
    dtype = p.dtype if p is not None else torch.float32
    return torch.randn(2, *shape, dtype=dtype, device=getattr(p, "device", None))
