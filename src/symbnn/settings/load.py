"""Reading config.yaml into a `Config`, with errors that name the file, the line and the key."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from symbnn import trust
from symbnn.settings.base import ConfigError
from symbnn.settings.workflow import Config

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def load_config(path: str | Path) -> Config:
    """The configuration in YAML file ``path``, checked."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{where}: not valid YAML: {problem}") from None
    return config_from_mapping(data, path)


def config_from_mapping(data: Any, source: str | Path = "config") -> Config:
    """Check a configuration already read (e.g. Snakemake's `config`, with --config
    overrides merged in); ``source`` is the file it came from, for the error message. The
    models it names by import path become trusted (`symbnn.trust`): the user named them."""
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{source}: expected a mapping at the top level, got {type(data).__name__}"
        )
    try:
        config = Config.parse(data, "")
    except ConfigError as exc:
        raise ConfigError(f"{source}{_line_of(source, str(exc))}: {exc}") from None
    trust.trust_config_models(config.experiments.values())
    return config


def _line_of(source: str | Path, message: str) -> str:
    """ ", line N" of the key an error message starts with, when ``source`` is a readable YAML
    file holding it (or its closest parent); "" otherwise."""
    import yaml

    try:
        node = yaml.compose(Path(source).read_text())
    except (OSError, yaml.YAMLError):
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
