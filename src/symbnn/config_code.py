"""The code a configuration names by import path ('package.module:attribute'), imported and
checked without calling any of it: its models (``nn.Module`` subclasses taking their options),
its methods (`Method` subclasses, whose settings their class's settings section checks) and
its dataset loaders (functions taking (split, root, **options)).

The settings layer (`symbnn.settings`) parses and checks values and trusts the paths a
configuration names; it imports none of them. What imports them sits here, above the models,
the methods and the data it checks, and its callers call it: `symbnn config check`,
`symbnn sample` and a command reading a store that names a model (`load_checked_config`), and the
workflow's planning (`symbnn.jobenv.workflow_settings`, which checks the dataset loaders in a
child process, ``python -m symbnn.config_code``: a loader's module usually imports torch, which
the Snakefile's process never imports; the child answers with the messages, which the parent
locates in the configuration file).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from symbnn import settings, trust, user_code
from symbnn.child_process import ask_child
from symbnn.methods import registry
from symbnn.runlog import log_to
from symbnn.settings import Config, ConfigError, Data, ImportedModel
from symbnn.settings.base import Problems
from symbnn.settings.load import located


def load_checked_config(path: str | Path) -> Config:
    """The configuration in YAML file ``path`` (`symbnn.settings.load_config`), and the code
    every experiment names imported and checked (`check_imports`); the import paths it names
    stay trusted only if both pass."""
    with trust.undone_on_error():  # a configuration that fails its checks trusts nothing
        config = settings.load_config(path)
        check_imports(config, config.experiments, path)
    return config


def check_imports(
    config: Config, names: Iterable[str], source: str | Path, datasets: bool = True
) -> None:
    """Import what each experiment of ``names`` names by import path and check that it is
    what it claims to be, calling none of it: its model, its methods and with ``datasets``
    its dataset loaders. ConfigError naming the key, the path and why, for every one that
    fails. The configuration is the user's own code to run (unlike a store's attributes,
    which are never imported)."""
    problems = Problems()
    for name in names:
        experiment, key = config.experiments[name], f"experiments.{name}"
        if isinstance(experiment.model, ImportedModel):
            with problems.collect():
                _importing(f"{key}.model.name", _model, experiment.model.to_dict())
        if datasets:
            problems.found.extend(check_loaders(key, experiment.data))
        methods = experiment.methods
        for entry in methods.imported if methods is not None else ():
            here = f"{key}.methods.{entry.name}"
            with problems.collect():
                described = _importing(f"{here}.class", registry.descriptor, entry.name, methods)
                parsed = described.settings.parse(dict(entry.options), here)
                methods.check_pool(described, parsed, f"{key}.methods")
    if problems.found:
        raise located(ConfigError.joined(problems.found), source)


def _importing(key: str, resolve: Callable[..., Any], *args: Any) -> Any:
    """``resolve(*args)``, its failures (a ValueError, or the module failing while it
    imports) as a ConfigError naming ``key``."""
    try:
        return resolve(*args)
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    except Exception as exc:  # the module itself failed while importing
        path = next((a for a in args if trust.is_import_path(a)), args[0])
        raise ConfigError(
            f"{key}: importing {path!r} failed: {type(exc).__name__}: {exc}"
        ) from None


def _model(spec: dict[str, Any]) -> Any:
    """The model class the spec names, checked with its options and not called."""
    # keeps torch out of planning: symbnn.models loads it, and a configuration naming no
    # model of its own never needs it
    from symbnn.models.imported import checked_class

    return checked_class(spec)


def check_loaders(key: str, data: Data) -> list[ConfigError]:
    """A ConfigError naming ``key``.data.ROLE for each dataset loader of the user's own that
    ``data`` names and that does not import or is no function taking (split, root,
    **options) (`symbnn.user_code.dataset_loader`; none is called)."""
    problems = Problems()
    for role, path, options in loaders(data):
        with problems.collect():
            _importing(f"{key}.data.{role}", user_code.dataset_loader, path, options)
    return problems.found


def loaders(data: Data) -> list[tuple[str, str, list[str]]]:
    """(role, import path, names of the options it is called with) of each dataset loader of
    the user's own that ``data`` names: ``train`` takes none, ``ood`` the ``ood_options``."""
    found = []
    for role in ("train", "ood"):
        path = getattr(data, role)
        if trust.is_import_path(path):
            options = list(data.ood_options.to_dict()) if role == "ood" else []
            found.append((role, path, options))
    return found


# --- the dataset loaders of a workflow run, checked in a child process ----------------------


def check_loaders_in_child(config: Config, names: Iterable[str], source: str | Path) -> None:
    """ConfigError naming the file, line and key of every dataset loader of the experiments
    ``names`` that fails `check_loaders`; no child is started when they name none. The child
    trusts what SYMBNN_TRUSTED_IMPORTS names (`symbnn.trust.export_to_environment` first)."""
    request = {
        name: config.experiments[name].data.to_dict()
        for name in names
        if loaders(config.experiments[name].data)
    }
    if not request:
        return
    errors = json.loads(ask_child(__name__, request, "checking the dataset loaders"))
    if errors:
        raise located(ConfigError("\n".join(errors), errors), source)


def loader_problems(request: dict[str, dict]) -> list[str]:
    """The messages of `check_loaders` for each experiment's data section in ``request``."""
    found = []
    for name, data in request.items():
        key = f"experiments.{name}"
        for error in check_loaders(key, Data.parse(data, f"{key}.data")):
            found.extend(error.errors)
    return found


def main() -> None:
    """The child: {experiment: data section} as JSON on stdin, the messages as a JSON list on
    stdout."""
    with log_to(None):  # a failure of the check itself: one line, exit status 1
        print(json.dumps(loader_problems(json.loads(sys.stdin.read()))))


if __name__ == "__main__":
    main()
