"""Reading config.yaml into a `Config`, with errors that name the file, the line and the key.

Every problem of a file is reported at once, one line each: its duplicated keys (plain YAML
keeps the later value without a word), the keys the settings layer rejects, and, with
`check_imports`, the code the configuration names by import path (models, methods,
datasets) that does not import, and methods of the user's own whose settings their class
rejects."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from symbnn import trust, user_code
from symbnn.settings.base import ConfigError, Problems
from symbnn.settings.training import ImportedModel
from symbnn.settings.workflow import Config

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_MERGE_KEY = "tag:yaml.org,2002:merge"


def load_config(path: str | Path) -> Config:
    """The configuration in YAML file ``path``, checked, the import paths of every experiment
    imported and checked too (`check_imports`); they stay trusted only if it passes."""
    path = Path(path)
    data, duplicates = _read_yaml(path)
    problems = Problems()
    problems.found.extend(duplicates)
    config = None
    with trust.undone_on_error():  # a configuration that fails its checks trusts nothing
        with problems.collect():
            config = config_from_mapping(data, path)
        problems.raise_any()
        check_imports(config, config.experiments, path)
    return config


def check_duplicated_keys(paths: Iterable[str | Path]) -> None:
    """ConfigError naming every repeated key of the YAML files ``paths``, and any file that
    cannot be read or is not YAML (for readers that load YAML themselves, like Snakemake's
    `configfile`)."""
    problems = Problems()
    for path in paths:
        with problems.collect():
            problems.found.extend(_read_yaml(Path(path))[1])
    problems.raise_any()


def _read_yaml(path: Path) -> tuple[Any, list[ConfigError]]:
    """(the YAML document of file ``path``, an error per key that repeats an earlier key of
    its mapping, naming file and line); ConfigError naming the file (and the line) when it
    cannot be read or is not YAML."""
    import yaml

    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(f"{path}: cannot read the configuration ({reason})") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        duplicates = [
            ConfigError(f"{path}, line {line}: {message}")
            for line, message in _duplicated_keys(node, "")
        ]
        return (None if node is None else loader.construct_document(node)), duplicates
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}{yaml_problem(exc)}") from None
    finally:
        loader.dispose()


def yaml_problem(exc: Exception) -> str:
    """ ", line N: not valid YAML: PROBLEM" of a YAML syntax error (the line where known)."""
    mark = getattr(exc, "problem_mark", None)
    where = f", line {mark.line + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{where}: not valid YAML: {problem}"


def _duplicated_keys(node: Any, where: str) -> Iterable[tuple[int, str]]:
    """(line, message) of each key that repeats an earlier key of its mapping."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        seen: dict[tuple[str, str], int] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE_KEY:
                continue
            path = f"{where}.{key.value}" if where else key.value
            first = seen.get((key.tag, key.value))
            if first is None:
                seen[(key.tag, key.value)] = key.start_mark.line
            else:
                yield (
                    key.start_mark.line + 1,
                    f"{path}: duplicated key (first at line {first + 1}); YAML would keep "
                    "only the later value: remove one",
                )
            yield from _duplicated_keys(value, path)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicated_keys(item, f"{where}[{index}]")


def config_from_mapping(data: Any, source: str | Path = "config") -> Config:
    """Check a configuration already read (e.g. Snakemake's `config`, with --config
    overrides merged in); ``source`` is the file it came from, for the error message. The
    models, methods and datasets it names by import path become trusted (`symbnn.trust`):
    the user named them."""
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{source}: expected a mapping at the top level, got {type(data).__name__}"
        )
    try:
        config = Config.parse(data, "")
    except ConfigError as exc:
        raise located(exc, source) from None
    trust.trust_config_imports(config.experiments.values())
    return config


def located(exc: ConfigError, source: str | Path) -> ConfigError:
    """``exc`` with each of its messages prefixed by the file and, where found, the line."""
    errors = [f"{source}{_line_of(source, message)}: {message}" for message in exc.errors]
    return ConfigError("\n".join(errors), errors)


def check_imports(
    config: Config, names: Iterable[str], source: str | Path, datasets: bool = True
) -> None:
    """Import what each experiment of ``names`` names by import path ('package.module:
    attribute') and check that it is what it claims to be, calling none of it: its model (an
    ``nn.Module`` subclass taking its options), its methods (`Method` subclasses, whose
    settings their class's settings section checks) and with ``datasets`` its dataset
    loaders (functions taking (split, root, **options)). ConfigError naming the key, the path
    and why, for every one that fails. The configuration is the user's own code to run
    (unlike a store's attributes, which are never imported)."""
    from symbnn.methods import registry

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
                settings = described.settings.parse(dict(entry.options), here)
                methods.check_pool(described, settings, f"{key}.methods")
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
    """The model class the spec names, checked with its options and not called (imported
    here: symbnn.models loads torch, which a configuration naming no model of its own never
    needs)."""
    from symbnn.models.imported import checked_class

    return checked_class(spec)


def check_loaders(key: str, data: Any) -> list[ConfigError]:
    """A ConfigError naming ``key``.data.ROLE for each dataset loader of the user's own that
    ``data`` (a `symbnn.settings.Data`) names and that does not import or is no function
    taking (split, root, **options) (`symbnn.user_code.dataset_loader`; none is called)."""
    problems = Problems()
    for role, path, options in loaders(data):
        with problems.collect():
            _importing(f"{key}.data.{role}", user_code.dataset_loader, path, options)
    return problems.found


def loaders(data: Any) -> list[tuple[str, str, list[str]]]:
    """(role, import path, names of the options it is called with) of each dataset loader of
    the user's own that a `symbnn.settings.Data` names: ``train`` takes none, ``ood`` the
    ``ood_options``."""
    found = []
    for role in ("train", "ood"):
        path = getattr(data, role)
        if trust.is_import_path(path):
            options = list(data.ood_options.to_dict()) if role == "ood" else []
            found.append((role, path, options))
    return found


def _line_of(source: str | Path, message: str) -> str:
    """ ", line N" of the key an error message starts with, when ``source`` is a readable YAML
    file holding it (or its closest parent); "" otherwise."""
    import yaml

    try:
        node = yaml.compose(Path(source).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return ""
    line = None
    for name, index in _PART.findall(message.split(":", 1)[0]):
        if isinstance(node, yaml.MappingNode) and name:
            found = [(k, v) for k, v in node.value if k.value == name]
            if not found:
                break
            line, node = found[0][0].start_mark.line, found[0][1]
        elif isinstance(node, yaml.SequenceNode) and index and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line
        else:
            break
    return "" if line is None else f", line {line + 1}"
