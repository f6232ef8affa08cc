"""Which code symbnn may import when something names it by import path.

A model, a method or a dataset of the user's own is named by an import path
``package.module:attribute``. Such a name can also arrive in data: a store's ``architecture``
or ``data`` attribute, a result pulled from a DVC remote. Importing it would run whatever the
module (or ``os:system``) does, so an import path is imported only when the user has named it:

- in the configuration symbnn checks (`symbnn.settings.load_config` and
  `config_from_mapping` trust every experiment's ``model.name``, the ``class`` of each of its
  methods and its ``data.train`` / ``data.ood`` that are import paths; a configuration that
  fails `load_config`'s checks, or `symbnn.config_code.load_checked_config`'s, trusts
  nothing);
- on the command line, ``symbnn --trust-model package.module:Net`` (the CLI also reads the
  current folder's config.yaml, when there is a valid one, the first time it needs to);
- in code, `trust` (or a model spec passed to `symbnn.api`);
- in the environment variable SYMBNN_TRUSTED_IMPORTS: comma-separated entries ``PATH`` (a
  model) or ``KIND=PATH``. The Snakefile sets it from the configuration, so that every
  workflow job (locally, or under Slurm with --export=ALL) trusts what the run's config names.

Anything else is refused with `UntrustedImport` before anything is imported.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

KINDS = ("model", "method", "dataset")
IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")  # package.module:attribute
ENVIRONMENT = "SYMBNN_TRUSTED_IMPORTS"


class UserCodeError(ValueError):
    """Code of the user's own failed: the message names the code and the step; the user's
    exception is ``__cause__`` (`symbnn.user_code.calling` makes one; importing a module that
    raises makes one here). Importable as `symbnn.user_code.UserCodeError`."""


_trusted: set[tuple[str, str]] = set()
# Consulted, once each, when a path is not trusted yet (the CLI's config.yaml): reading a
# configuration costs a few milliseconds that a command naming no import path never pays.
_lazy_sources: list[Callable[[], object]] = []


class UntrustedImport(ValueError):
    """An import path that neither the configuration, the command line nor the code named."""


def is_import_path(name: object) -> bool:
    """Shipped models (and methods, datasets) have plain names; an import path has a colon."""
    return isinstance(name, str) and ":" in name


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r} of trusted import (kinds: {', '.join(KINDS)})")


def trust(kind: str, path: str) -> None:
    """Allow importing ``path`` (``package.module:attribute``) as a ``kind``."""
    _check_kind(kind)
    _trusted.add((kind, path))


def trust_model(path: str) -> None:
    trust("model", path)


def from_environment() -> set[tuple[str, str]]:
    """The (kind, path) pairs SYMBNN_TRUSTED_IMPORTS names."""
    found = set()
    for entry in os.environ.get(ENVIRONMENT, "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        kind, sep, path = entry.partition("=")
        found.add((kind.strip(), path.strip()) if sep else ("model", entry))
    return found


def add_source(load: Callable[[], object]) -> None:
    """``load()`` registers more trusted paths (e.g. reads a configuration); it is called
    only if a path is not trusted otherwise, and at most once."""
    if load not in _lazy_sources:
        _lazy_sources.append(load)


def is_trusted(kind: str, path: str) -> bool:
    _check_kind(kind)
    if (kind, path) in _trusted or (kind, path) in from_environment():
        return True
    while _lazy_sources:
        load = _lazy_sources.pop(0)
        try:
            with undone_on_error():
                load()
        except (OSError, ValueError):  # an unreadable or invalid config names nothing
            continue
        if (kind, path) in _trusted:
            return True
    return False


@contextlib.contextmanager
def undone_on_error() -> Iterator[None]:
    """Trust what the block trusts only if it succeeds: a configuration that fails its checks
    (a model that is no class, say) has named nothing."""
    before = set(_trusted)
    try:
        yield
    except BaseException:
        _trusted.intersection_update(before)
        raise


def require(kind: str, path: str, where: str = "") -> None:
    """UntrustedImport (naming ``where`` the path came from and how to allow it) unless
    ``path`` is trusted as a ``kind``."""
    if is_trusted(kind, path):
        return
    if kind == "model":
        remedy = (
            f"if you trust it, name it as model.name in your config.yaml or pass "
            f"`symbnn --trust-model {path}`"
        )
    else:
        key = "a method's class" if kind == "method" else "data.train or data.ood"
        remedy = (
            f"if you trust it, name it as {key} in your config.yaml or add {kind}={path} to "
            f"{ENVIRONMENT}"
        )
    prefix = f"{where}: " if where else ""
    raise UntrustedImport(
        f"{prefix}{kind} {path!r} is named by import path, and symbnn imports code only where "
        f"your configuration or command line names it; {remedy}"
    )


def import_object(kind: str, path: str) -> Any:
    """The object ``package.module:attribute`` names (dots in the attribute walk nested
    attributes), imported only if ``path`` is trusted as a ``kind`` (else `UntrustedImport`,
    nothing imported); ValueError naming the path when the module or attribute is missing,
    `symbnn.user_code.UserCodeError` when the module raises while it is imported."""
    require(kind, path)
    module_name, _, attribute = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"{kind} {path!r}: cannot import module {module_name!r} ({exc}); is it installed, "
            "or on PYTHONPATH?"
        ) from exc
    except Exception as exc:  # the module's own code failed while it was imported
        raise UserCodeError(f"importing {path!r} failed: {type(exc).__name__}: {exc}") from exc
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ValueError(f"{kind} {path!r}: {target.__name__!r} has no attribute {part!r}")
        target = getattr(target, part)
    return target


def config_imports(experiments: Iterable[object]) -> set[tuple[str, str]]:
    """The (kind, path) pairs the experiments name by import path: each ``model.name``, each
    method's ``class`` and each of ``data.train`` / ``data.ood`` (shipped names have none)."""
    found = set()
    for experiment in experiments:
        name = getattr(getattr(experiment, "model", None), "name", None)
        if is_import_path(name):
            found.add(("model", name))
        data = getattr(experiment, "data", None)
        for dataset in (getattr(data, "train", None), getattr(data, "ood", None)):
            if is_import_path(dataset):
                found.add(("dataset", dataset))
        methods = getattr(experiment, "methods", None)
        for imported in getattr(methods, "imported", ()):
            found.add(("method", imported.path))
    return found


def trust_config_imports(experiments: Iterable[object]) -> None:
    """Trust every import path the experiments name (`config_imports`)."""
    for kind, path in config_imports(experiments):
        trust(kind, path)


def export_to_environment() -> str:
    """Put every trusted path in SYMBNN_TRUSTED_IMPORTS (what was there is kept), so that
    the processes this one starts (workflow jobs) trust the same code; returns its value."""
    entries = [p if k == "model" else f"{k}={p}" for k, p in sorted(_trusted | from_environment())]
    os.environ[ENVIRONMENT] = ",".join(entries)
    return os.environ[ENVIRONMENT]


def forget() -> None:
    """Trust nothing registered in this process (tests)."""
    _trusted.clear()
    _lazy_sources.clear()
