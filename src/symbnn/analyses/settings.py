"""The settings blocks of the analyses (`analyses.<name>` in config.yaml) as dataclasses."""

from __future__ import annotations

from typing import Any


def known_keys(section: str, settings_class: type, config: dict | None) -> dict[str, Any]:
    """A copy of `config` (None: empty); a key that is not a field of the dataclass
    `settings_class` raises ValueError naming it and the section."""
    config = dict(config or {})
    fields = settings_class.__dataclass_fields__
    unknown = sorted(set(config) - set(fields))
    if unknown:
        raise ValueError(f"{section}: unknown key {unknown[0]!r} (known: {', '.join(fields)})")
    return config
