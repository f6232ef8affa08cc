"""The JSON schema of config.yaml, generated from the settings sections (for editors and
other tools; `symbnn config schema` prints it). The sections stay the one source of
defaults and bounds; a test checks that schema and parser agree on good and bad configs."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal

from symbnn.settings.base import MISSING, ImportPath, Section, is_internal, plain, type_hints
from symbnn.settings.workflow import Config

_BOUNDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}


def config_schema() -> dict[str, Any]:
    """Draft 2020-12 schema of the whole configuration."""
    definitions: dict[str, Any] = {}
    root = _section_schema(Config, definitions)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **root, "$defs": definitions}


def _section_schema(cls: type[Section], definitions: dict[str, Any]) -> dict[str, Any]:
    hints = type_hints(cls)
    properties, required = {}, []
    for f in dataclasses.fields(cls):
        if is_internal(f):
            continue
        schema = _type_schema(hints[f.name], f.metadata, definitions)
        if f.metadata.get("doc"):
            schema = {"description": f.metadata["doc"], **schema}
        if f.default is MISSING:
            required.append(f.name)
        else:
            schema["default"] = plain(f.default)
        properties[f.name] = schema
    out: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }
    out.update(cls.schema_extras())
    if cls.DOC:
        out = {"description": cls.DOC, **out}
    if required:
        out["required"] = required
    return out


def _ref(cls: type[Section], definitions: dict[str, Any]) -> dict[str, Any]:
    if cls.__name__ not in definitions:
        definitions[cls.__name__] = {}  # placeholder: breaks recursion
        definitions[cls.__name__] = _section_schema(cls, definitions)
    return {"$ref": f"#/$defs/{cls.__name__}"}


def _number_bounds(meta: typing.Mapping[str, Any]) -> dict[str, Any]:
    return {_BOUNDS[key]: meta[key] for key in _BOUNDS if meta.get(key) is not None}


def _type_schema(
    tp: Any, meta: typing.Mapping[str, Any], definitions: dict[str, Any]
) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        arms = [_type_schema(arm, meta, definitions) for arm in typing.get_args(tp)]
        return {"anyOf": arms}
    if origin is Literal:
        return {"enum": list(typing.get_args(tp))}
    if origin is tuple:
        args = typing.get_args(tp)
        out: dict[str, Any] = {"type": "array"}
        if len(args) == 2 and args[1] is Ellipsis:
            out["items"] = _type_schema(args[0], meta, definitions)
        else:
            out["prefixItems"] = [_type_schema(a, meta, definitions) for a in args]
            out["minItems"] = out["maxItems"] = len(args)
            out["items"] = False
        for key, name in (("min_items", "minItems"), ("max_items", "maxItems")):
            if meta.get(key) is not None:
                out[name] = meta[key]
        if meta.get("unique"):
            out["uniqueItems"] = True
        return out
    if origin is dict:
        _, item = typing.get_args(tp)
        return {"type": "object", "additionalProperties": _type_schema(item, {}, definitions)}
    if isinstance(tp, type) and issubclass(tp, Section):
        return _ref(tp, definitions)
    if tp is Any:
        return {}
    if tp is ImportPath:
        return dict(ImportPath.SCHEMA)
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer", **_number_bounds(meta)}
    if tp is float:
        return {"type": "number", **_number_bounds(meta)}
    if tp is str:
        pattern = meta.get("pattern")
        # JSON schema patterns search; the parser matches the whole text
        return {"type": "string", **({"pattern": f"^(?:{pattern})$"} if pattern else {})}
    if tp is type(None):
        return {"type": "null"}
    raise TypeError(f"no JSON schema for type {tp!r}")
