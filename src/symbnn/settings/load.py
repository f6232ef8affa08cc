"""Reading config.yaml into a `Config`, with errors that name the file, the line and the key.

Every problem of a file is reported at once, one line each: its duplicated keys (plain YAML
keeps the later value without a word) and the keys the settings layer rejects. The code the
configuration names by import path (models, methods, datasets) is trusted here, never
imported: `symbnn.config_code` imports and checks it, for the callers that run it."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from symbnn import trust
from symbnn.settings.base import ConfigError, Problems
from symbnn.settings.workflow import Config

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_MERGE_KEY = "tag:yaml.org,2002:merge"


def load_config(path: str | Path) -> Config:
    """The configuration in YAML file ``path``, checked; the import paths it names stay trusted
    only if it passes (`symbnn.config_code.load_checked_config` also imports and checks
    them)."""
    path = Path(path)
    data, duplicates = _read_yaml(path)
    problems = Problems()
    problems.found.extend(duplicates)
    config = None
    with trust.undone_on_error():  # a configuration that fails its checks trusts nothing
        with problems.collect():
            config = config_from_mapping(data, path)
        problems.raise_any()
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
