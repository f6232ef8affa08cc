"""Which methods exist, and how the workflow plans them: the one list of methods.

Every method describes itself the same way: a `symbnn.methods.interface.Method` subclass whose
class attributes `describe` reads into a `Descriptor`. The shipped methods are the keys of
`SHIPPED` (`symbnn.settings.methods`, beside their settings sections), each the class `METHOD`
of its folder `symbnn.methods.<key>`; the others are those an experiment's configuration
names by import path (``methods: {mine: {class: "package.module:Mine", ...}}``). Every
function here reads the method's descriptor, none singles a method out by its name. No torch
is imported: the Snakefile plans jobs from here, and every `snakemake` start would pay for
the import. A shipped method's folder keeps torch in its `fit` module, imported by its steps
inside jobs only; a user's class is imported when its settings are first read, so its module
should keep torch out of its top level too.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from functools import cache

from symbnn import trust, user_code
from symbnn.methods.interface import Descriptor, Draw, Method, describe, split_counts
from symbnn.settings import Experiment, Methods, Section
from symbnn.settings.methods import SECTIONS, SHIPPED, ImportedMethod


@cache
def _shipped(name: str) -> Descriptor:
    """The descriptor of shipped method ``name``: its folder's class, described like a
    user's; its settings must be the section `Methods` reads for the key."""
    module = importlib.import_module(f"symbnn.methods.{name}")
    cls = module.METHOD
    described = describe(name, f"{module.__name__}:{cls.__name__}", cls)
    if described.settings is not SECTIONS[name]:
        raise ValueError(
            f"method {described.implementation!r}: its settings {described.settings.__name__} "
            f"are not the section symbnn.settings.methods.SECTIONS[{name!r}] "
            f"({SECTIONS[name].__name__})"
        )
    return described


METHOD_NAMES = SHIPPED
LABELS = {name: _shipped(name).label for name in SHIPPED}

__all__ = [
    "Descriptor",
    "Draw",
    "LABELS",
    "METHOD_NAMES",
    "SHIPPED",
    "batched_fits",
    "check_method",
    "check_variant",
    "code_params",
    "configured_methods",
    "descriptor",
    "fit_counts",
    "fit_settings",
    "implementation",
    "is_shipped",
    "labels",
    "method_names",
    "mode_blocks",
    "predictive",
    "sample_plan",
    "sample_settings",
    "samples_at_fit",
    "settings_class",
    "settings_of",
    "split_counts",
    "variants",
]


def _imported(method: str, methods: Methods | None) -> ImportedMethod | None:
    for entry in getattr(methods, "imported", ()):
        if entry.name == method:
            return entry
    return None


def descriptor(method: str, methods: Methods | None = None) -> Descriptor:
    """The descriptor of a shipped method, or of one that ``methods`` names by import path
    (its class imported, if trusted: `symbnn.trust`)."""
    if method in SHIPPED:
        return _shipped(method)
    entry = _imported(method, methods)
    if entry is None:
        configured = configured_methods(methods) if methods is not None else []
        extra = [name for name in configured if name not in SHIPPED]
        raise ValueError(f"unknown method {method!r} (known: {', '.join([*METHOD_NAMES, *extra])})")
    return describe(entry.name, entry.path, trust.import_object("method", entry.path))


def is_shipped(described: Descriptor) -> bool:
    """Whether the descriptor is one of symbnn's own methods (else the user's class)."""
    return described.name in SHIPPED and _shipped(described.name) is described


def check_method(method: str, methods: Methods | None = None) -> str:
    descriptor(method, methods)
    return method


def variants(method: str, methods: Methods | None = None) -> tuple[str, ...]:
    """The variants a method has: both, or multi-mode only (e.g. Deep Ensembles)."""
    return descriptor(method, methods).variants


def check_variant(method: str, variant: str, methods: Methods | None = None) -> str:
    return descriptor(method, methods).check_variant(variant)


def configured_methods(methods: Methods) -> list[str]:
    """The methods an experiment's `methods` section turns on: the shipped ones in registry
    order, then the user's in the configuration's order."""
    shipped = [name for name in SHIPPED if getattr(methods, name) is not None]
    return shipped + [entry.name for entry in methods.imported]


def method_names(sections: Iterable[Methods]) -> list[str]:
    """Every method's name: the shipped ones, then those the sections name by import path."""
    names = list(METHOD_NAMES)
    for methods in sections:
        names += [entry.name for entry in methods.imported if entry.name not in names]
    return names


def code_params(method: str, methods: Methods) -> dict[str, str]:
    """{"class": import path} of a method of the user's own (naming other code reruns its
    jobs); {} for a shipped method, whose code is symbnn's."""
    entry = _imported(method, methods)
    return {} if entry is None else {"class": entry.path}


def labels(methods: Methods) -> dict[str, str]:
    """Table 1's row label of each configured method, in `configured_methods` order."""
    return {name: descriptor(name, methods).label for name in configured_methods(methods)}


def settings_of(method: str, methods: Methods) -> Section:
    """The method's settings section (the method must be configured); a user method's
    settings are checked by its class's settings section, errors naming the config key."""
    entry = _imported(method, methods)
    if entry is not None:
        described = descriptor(method, methods)
        return described.settings.parse(dict(entry.options), f"methods.{method}")
    section = getattr(methods, descriptor(method).name)
    if section is None:
        raise ValueError(f"methods.{method} is not configured for this experiment")
    return section


def settings_class(method: str, methods: Methods | None = None) -> type[Section]:
    return descriptor(method, methods).settings


def sample_plan(method: str, variant: str, methods: Methods) -> list[Draw]:
    """Which samples a variant draws from which mode, unit by unit
    (`symbnn.methods.interface.Descriptor.sample_plan`)."""
    described = descriptor(method, methods)
    return described.sample_plan(variant, methods, settings_of(method, methods))


def fit_counts(method: str, methods: Methods) -> list[int]:
    """Samples each mode's fit draws when the method samples while fitting."""
    return descriptor(method, methods).fit_counts(methods, settings_of(method, methods))


def batched_fits(experiment: Experiment) -> bool:
    """Whether the methods that fit in a batch fit the experiment's modes in one batched run:
    its model has a hand-written stacked pass and its recipe no augmentation (what
    `symbnn.train.batched.hand_written` checks on the built model, inside the fit jobs)."""
    return experiment.model.HAND_WRITTEN and experiment.recipe.augment == "none"


def mode_blocks(method: str, methods: Methods, batched: bool = False) -> list[list[int]]:
    """The mode indices each fit job handles (`batched`: `batched_fits` of the experiment)."""
    described = descriptor(method, methods)
    return described.mode_blocks(methods, settings_of(method, methods), batched)


def samples_at_fit(method: str, methods: Methods | None = None) -> bool:
    return descriptor(method, methods).samples_at_fit


def fit_settings(method: str, methods: Methods) -> dict:
    """The settings a method's fit reads (sampling- and prediction-only keys left out): its
    rule's params."""
    return descriptor(method, methods).settings_less(settings_of(method, methods), sampling=True)


def sample_settings(method: str, methods: Methods) -> dict:
    """The settings a method's sample step reads: all but the prediction-only ones."""
    return descriptor(method, methods).settings_less(settings_of(method, methods), sampling=False)


def predictive(method: str, methods: Methods) -> str:
    """How the metrics predict with the method's samples: "sampled" (each sample's network as
    is) unless the method's settings say "linearised" (at the sample's mode)."""
    return descriptor(method, methods).predictive(settings_of(method, methods))


def implementation(described: Descriptor) -> Method:
    """An instance of the method's implementation class (imported here: in jobs only). A
    user's class is imported only if trusted; a shipped one is symbnn's own code."""
    if is_shipped(described):
        module, _, name = described.implementation.partition(":")
        cls = getattr(importlib.import_module(module), name)
    else:
        cls = trust.import_object("method", described.implementation)
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise ValueError(f"method {described.implementation!r} is not a Method subclass")
    if is_shipped(described):
        return cls()
    with user_code.calling(
        f"method {described.name!r} ({described.implementation})", "in __init__"
    ):
        return cls()
