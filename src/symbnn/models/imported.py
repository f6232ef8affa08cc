"""Models of the user's own, named in a spec by import path.

``{"name": "package.module:Class", "options": {...}, "input_shape": [C, H, W]}``: the class
(an ``nn.Module`` subclass; dots walk nested attributes) is called with ``options`` as keyword
arguments. ``input_shape`` is the shape of one input, used only to trace the model when its
symmetry structure is derived (`example_input`).

Only a trusted path is imported (`symbnn.trust`): one the configuration, the command line
(``--trust-model``) or the calling code named, never one read from a store or a result. What
it names is checked before it is called: a class, an ``nn.Module`` subclass, whose signature
takes the options; and the options are plain values (`symbnn.user_code.check_options`), as a
store's ``architecture`` may carry them.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from symbnn import trust, user_code

SPEC_KEYS = ("name", "options", "input_shape")


def resolve(path: str) -> type[nn.Module]:
    """The ``nn.Module`` subclass ``package.module:Class`` names; a clear error when it is
    missing or anything else (a function, an object), and `symbnn.trust.UntrustedImport`
    (nothing imported) when nobody trusted it."""
    target = trust.import_object("model", path)
    if not (isinstance(target, type) and issubclass(target, nn.Module)):
        what = (
            f"the class {target.__name__}"
            if isinstance(target, type)
            else (f"a {type(target).__name__}")
        )
        raise ValueError(
            f"model {path!r}: {path.partition(':')[2]!r} is {what}, not a subclass of "
            "torch.nn.Module (a model named by import path is its class)"
        )
    return target


def checked_class(spec: dict[str, Any]) -> tuple[type[nn.Module], dict[str, Any]]:
    """(the spec's class, its options), checked without calling anything: the spec's keys,
    its options plain values (`symbnn.user_code.check_options`, before anything is imported),
    the class an ``nn.Module`` subclass whose signature takes the options."""
    path = spec["name"]
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise ValueError(
            f"model {path!r}: unknown spec keys {unknown} (a model named by import path takes "
            f"{', '.join(SPEC_KEYS)}; constructor arguments go under 'options')"
        )
    options = spec.get("options") or {}
    if not isinstance(options, dict):
        raise ValueError(f"model {path!r}: options must be a mapping, got {options!r}")
    user_code.check_options(options, f"model {path!r}: options")
    cls = resolve(path)
    try:
        inspect.signature(cls).bind(**options)
    except TypeError as exc:
        raise ValueError(f"bad options for model {path!r}: {exc}") from None
    except ValueError:  # no signature to read: the call says
        pass
    return cls, dict(options)


def build_imported(spec: dict[str, Any]) -> nn.Module:
    """The spec's class called with its options, once `checked_class` passed; an exception
    of the class's own is a `symbnn.user_code.UserCodeError` naming the model."""
    cls, options = checked_class(spec)
    with user_code.calling(f"model {spec['name']!r}", f"in __init__ with options {options}"):
        model = cls(**options)
    if not isinstance(model, nn.Module):  # a __new__ of its own may return anything
        raise ValueError(f"model {spec['name']!r} returned {type(model).__name__}, not a module")
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
