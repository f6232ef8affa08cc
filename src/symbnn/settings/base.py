"""The machinery of the settings layer: a section is a frozen dataclass whose fields carry
their default, bounds and description; `Section.parse` builds one from a config mapping and
every error names the key as the config spells it (``experiments.default.recipe.lr: must
be > 0, got -1``).

Field types understood by the parser (and by the JSON-schema generator in
`symbnn.settings.schema`): bool, int, float, str, Literal[...], tuple[T, ...] and fixed
tuples, dict[str, T], Any (handed on unchecked), `ImportPath` (a string naming the user's
code), nested sections, unions of these (``X | None``, sections told apart by their ``name``
literal) and ``Literal[False]`` for "switched off".

A field whose metadata says ``internal`` is no config key: the section's own
`Section.split_extra_keys` fills it from keys that are not fields (e.g. the methods of the
user's own in `symbnn.settings.methods.Methods`).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import difflib
import math
import numbers
import re
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Literal, TypeVar

from symbnn.trust import IMPORT_PATH

S = TypeVar("S", bound="Section")
MISSING = dataclasses.MISSING

# Upper bounds of counts: generous but finite, so that a typo (an extra 000) fails the config
# check instead of exhausting the machine. Each lies far above the largest study: the 8,192
# released networks, 10,000 toy networks, 1,000-network posteriors with 100 samples per method.
MAX_SEED = 2**32 - 1  # seeds and first seeds
MAX_NETWORKS = 100_000  # networks of a posterior or a pool, networks compared
MAX_DRAWS = 10_000  # samples per method, draws per estimate, snapshots, pairs
MAX_EPOCHS = 100_000  # epochs (and milestones)
MAX_BATCH = 1_000_000  # images or points per step or forward pass
MAX_WIDTH = 100_000  # units, channels, kernel sizes of a model
MAX_POINTS = 10_001  # points on an interpolation path
MAX_STEPS = 10_000_000  # optimisation steps between two events of a chain


class ConfigError(ValueError):
    """A setting is missing or wrong; the message starts with the key's dotted path.

    A parse reports every problem it finds, not only the first: ``errors`` holds one message
    per problem (each starting with its key), and the message is those, one per line."""

    def __init__(self, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.errors = list(errors) if errors else [message]

    @classmethod
    def joined(cls, problems: list[ConfigError]) -> ConfigError:
        """One error reporting every problem of ``problems`` (in order)."""
        if len(problems) == 1:
            return problems[0]
        errors = [message for problem in problems for message in problem.errors]
        return cls("\n".join(errors), errors)


class Problems:
    """Collects the ConfigErrors of a parse, so that one run reports them all:

    problems = Problems()
    with problems.collect():
        ...   # a ConfigError raised here is kept and the parse goes on
    problems.raise_any()
    """

    def __init__(self) -> None:
        self.found: list[ConfigError] = []

    @contextlib.contextmanager
    def collect(self) -> Iterator[None]:
        try:
            yield
        except ConfigError as exc:
            self.found.append(exc)

    def add(self, message: str) -> None:
        self.found.append(ConfigError(message))

    def raise_any(self) -> None:
        if self.found:
            raise ConfigError.joined(self.found)


def setting(
    default: Any = MISSING,
    doc: str = "",
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    min_items: int | None = None,
    max_items: int | None = None,
    unique: bool = False,
    increasing: bool = False,
    pattern: str | None = None,
) -> Any:
    """A section field: its default (none: the key is required), a one-line description and
    bounds. Number bounds apply to numbers and to the items of tuples of numbers; ``pattern``
    is a regular expression a string must match whole."""
    metadata = {
        "doc": doc,
        "ge": ge,
        "gt": gt,
        "le": le,
        "lt": lt,
        "min_items": min_items,
        "max_items": max_items,
        "unique": unique,
        "increasing": increasing,
        "pattern": pattern,
    }
    return dataclasses.field(default=default, metadata=metadata)


class ImportPath(str):
    """The type of a setting that may name the user's code, ``package.module:attribute``
    (parsed values are plain strings; the code is imported only through `symbnn.trust`)."""

    PATTERN = IMPORT_PATH.pattern
    FORM = "an import path 'package.module:attribute'"
    SCHEMA: ClassVar[dict[str, str]] = {"type": "string", "pattern": f"^(?:{PATTERN})$"}


def internal_setting(default: Any, doc: str) -> Any:
    """A field that is no config key: the section's `Section.split_extra_keys` fills it."""
    return dataclasses.field(default=default, metadata={"doc": doc, "internal": True})


def is_internal(field: dataclasses.Field) -> bool:
    return bool(field.metadata.get("internal"))


# Set while `Section.parse` builds a section: it has checked every value already, naming
# each by its config path, so the constructor need not check them again.
_PARSING: contextvars.ContextVar[bool] = contextvars.ContextVar("parsing", default=False)


@dataclasses.dataclass(frozen=True)
class Section:
    """Base class of every settings section (subclasses are frozen dataclasses). Built by
    `parse` from a config mapping, or directly (``Recipe(epochs=2, batch_size=64, lr=0.1)``):
    either way every value is checked, so a section in hand is always valid."""

    # one line for the JSON schema's description of the section
    DOC: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if _PARSING.get():
            return
        where = type(self).__name__
        hints = type_hints(type(self))
        problems = Problems()
        for f in dataclasses.fields(self):
            if is_internal(f):  # filled by the section's own parse, which checked it
                continue
            with problems.collect():
                value = parse_value(
                    hints[f.name], getattr(self, f.name), _join(where, f.name), f.metadata
                )
                object.__setattr__(self, f.name, value)  # lists become tuples, "true" a bool
        problems.raise_any()
        self.check(where)

    @classmethod
    def parse(cls: type[S], data: Any, where: str) -> S:
        """Build the section from a mapping (None: every default), checking every value."""
        if data is None:
            data = {}
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {_show(data)}")
        hints = type_hints(cls)
        problems = Problems()
        data, values = cls.split_extra_keys(data, where, problems)
        known = [f.name for f in dataclasses.fields(cls) if not is_internal(f)]
        for key in data:
            if key not in known:
                problems.add(f"{_join(where, key)}: unknown key{_suggest(str(key), known)}")
        for f in dataclasses.fields(cls):
            if is_internal(f):
                continue
            key = _join(where, f.name)
            if f.name in data:
                with problems.collect():
                    values[f.name] = parse_value(hints[f.name], data[f.name], key, f.metadata)
            elif f.default is MISSING and f.default_factory is MISSING:
                problems.add(f"{key}: missing (required; {f.metadata.get('doc') or 'no default'})")
        # rules across keys need every key parsed: they run once the keys are right
        problems.raise_any()
        token = _PARSING.set(True)
        try:
            section = cls(**values)
        finally:
            _PARSING.reset(token)
        section.check(where)
        return section

    @classmethod
    def split_extra_keys(
        cls, data: Mapping, where: str, problems: Problems
    ) -> tuple[Mapping, dict[str, Any]]:
        """(the keys of ``data`` that are fields, the values of the internal fields) for a
        section that takes keys of its own besides its fields; errors go to ``problems``. By
        default every key must be a field."""
        return data, {}

    @classmethod
    def schema_extras(cls) -> dict[str, Any]:
        """JSON-schema entries for the keys `split_extra_keys` takes (none by default)."""
        return {}

    def check(self, where: str) -> None:
        """Rules across this section's keys; raise ConfigError naming the key."""

    def to_dict(self) -> dict[str, Any]:
        """Plain YAML/JSON types, keys in field order (so reordering config.yaml changes
        nothing that compares these dicts)."""
        return {
            f.name: plain(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if not is_internal(f)
        }

    @classmethod
    def default(cls, name: str) -> Any:
        """The default of field ``name`` (for command-line flags)."""
        for f in dataclasses.fields(cls):
            if f.name == name:
                if f.default is MISSING:
                    raise KeyError(f"{cls.__name__}.{name} has no default")
                return f.default
        raise KeyError(f"{cls.__name__} has no field {name!r}")

    @classmethod
    def choices(cls, name: str) -> tuple[Any, ...]:
        """The values a Literal field ``name`` admits (for command-line choices)."""
        tp = type_hints(cls)[name]
        arms = _union_args(tp) or (tp,)
        return tuple(
            o for arm in arms if typing.get_origin(arm) is Literal for o in typing.get_args(arm)
        )

    @classmethod
    def doc(cls, name: str) -> str:
        return next(f.metadata.get("doc", "") for f in dataclasses.fields(cls) if f.name == name)

    def replace(self: S, **changes: Any) -> S:
        """A copy with ``changes`` (checked like a config mapping)."""
        return type(self).parse({**self.to_dict(), **changes}, type(self).__name__)


def type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def plain(value: Any) -> Any:
    """Sections to dicts and tuples to lists, recursively."""
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


def _join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _suggest(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{hint}; known keys: {', '.join(known)}"


def _is_section(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Section)


def _union_args(tp: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return None


def parse_value(tp: Any, value: Any, where: str, meta: Mapping[str, Any] | None = None) -> Any:
    """``value`` checked and converted to type ``tp`` (tuples for sequences, sections for
    mappings), then checked against the field's bounds ``meta``."""
    meta = meta or {}
    parsed = _parse_type(tp, value, where)
    _check_bounds(parsed, where, meta)
    return parsed


def _parse_type(tp: Any, value: Any, where: str) -> Any:
    arms = _union_args(tp)
    if arms is not None:
        return _parse_union(arms, value, where)
    origin = typing.get_origin(tp)
    if origin is Literal:
        return _parse_literal(typing.get_args(tp), value, where)
    if origin is tuple:
        return _parse_tuple(typing.get_args(tp), value, where)
    if origin is dict:
        _, item_type = typing.get_args(tp)
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {_show(value)}")
        items, problems = {}, Problems()
        for k, v in value.items():
            with problems.collect():
                items[str(k)] = _parse_type(item_type, v, _join(where, k))
        problems.raise_any()
        return items
    if _is_section(tp):
        return tp.parse(value, where)
    if tp is Any:
        return value  # handed on unchecked (a user model's own constructor arguments)
    if tp is ImportPath:
        if not isinstance(value, str) or not re.fullmatch(ImportPath.PATTERN, value):
            raise ConfigError(f"{where}: expected {ImportPath.FORM}, got {_show(value)}")
        return value
    if tp is bool:
        return _parse_bool(value, where)
    if tp is int:
        return _parse_int(value, where)
    if tp is float:
        return _parse_float(value, where)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {_show(value)}")
        return value
    if tp is type(None):
        if value is not None:
            raise ConfigError(f"{where}: expected nothing (null), got {_show(value)}")
        return None
    raise TypeError(f"{where}: the settings layer cannot parse type {tp!r}")


def _parse_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    # `snakemake --config download=true` passes the text "true"
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"{where}: expected true or false, got {_show(value)}")


def _parse_int(value: Any, where: str) -> int:
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)  # `snakemake --config` passes some numbers as text
    # bool is an int subclass: a YAML `true` where a count belongs is a mistake, not 1
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{where}: expected an integer, got {_show(value)}")
    return int(value)


def _parse_float(value: Any, where: str) -> float:
    if isinstance(value, str):
        # PyYAML reads 2e-4 (no dot) as text, and `snakemake --config` passes some numbers as
        # text: a string that is a number is one
        try:
            value = float(value)
        except ValueError:
            raise ConfigError(f"{where}: expected a number, got {_show(value)}") from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{where}: expected a number, got {_show(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise ConfigError(f"{where}: must be finite, got {_show(value)}")
    return number


def _parse_literal(options: tuple[Any, ...], value: Any, where: str) -> Any:
    for option in options:
        # 0 == False in Python: compare types too, so `false` never stands for 0
        if type(option) is type(value) and option == value:
            return option
    shown = ", ".join(_literal_text(o) for o in options)
    raise ConfigError(f"{where}: must be one of {shown}; got {_show(value)}")


def _literal_text(option: Any) -> str:
    return str(option).lower() if isinstance(option, bool) else str(option)


def _parse_tuple(args: tuple[Any, ...], value: Any, where: str) -> tuple[Any, ...]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, list | tuple):
        raise ConfigError(f"{where}: expected a list, got {_show(value)}")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_parse_type(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if len(value) != len(args):
        raise ConfigError(f"{where}: expected a list of {len(args)} items, got {_show(value)}")
    return tuple(_parse_type(t, v, f"{where}[{i}]") for i, (t, v) in enumerate(zip(args, value)))


def _parse_union(arms: tuple[Any, ...], value: Any, where: str) -> Any:
    if value is None and type(None) in arms:
        return None
    sections = [arm for arm in arms if _is_section(arm)]
    if isinstance(value, tuple(sections)):
        return value
    if isinstance(value, Mapping) and len(sections) > 1:
        return _parse_tagged(sections, value, where)
    if isinstance(value, Mapping) and sections:
        return sections[0].parse(value, where)
    errors = []
    for arm in arms:
        if arm is type(None) or _is_section(arm):
            continue
        try:
            return _parse_type(arm, value, where)
        except ConfigError as exc:
            errors.append(str(exc).removeprefix(f"{where}: "))
    if sections:
        errors.append("a mapping")
    if ImportPath in arms:  # a shipped name or code of the user's: "must be one of A, B or ..."
        choices = " or ".join(_short(e) for e in errors)
        raise ConfigError(f"{where}: {choices}; got {_show(value)}")
    raise ConfigError(
        f"{where}: expected {' or '.join(_short(e) for e in errors)}; got {_show(value)}"
    )


def _short(error: str) -> str:
    return error.split("; got")[0].split(", got")[0].removeprefix("expected ")


def _parse_tagged(sections: list[type[Section]], value: Mapping, where: str) -> Section:
    """Sections told apart by the literal of their ``name`` field; a section whose ``name`` is
    a plain string (at most one: an import path, told apart by its colon) takes the rest."""
    by_name, open_section = {}, None
    for section in sections:
        hint = type_hints(section)["name"]
        if hint is str:
            open_section = section
        for option in typing.get_args(hint):
            by_name[option] = section
    name = value.get("name")
    if name in by_name:
        return by_name[name].parse(value, where)
    if open_section is not None and isinstance(name, str) and ":" in name:
        return open_section.parse(value, where)
    also = f" or {open_section.NAME_FORM}" if open_section is not None else ""
    raise ConfigError(
        f"{_join(where, 'name')}: must be one of {', '.join(by_name)}{also}; got {_show(name)}"
    )


def _check_bounds(value: Any, where: str, meta: Mapping[str, Any]) -> None:
    if value is None or value is False:
        return
    if isinstance(value, str) and meta.get("pattern"):
        if not re.fullmatch(meta["pattern"], value):
            raise ConfigError(f"{where}: expected {meta['doc']}, got {_show(value)}")
        return
    if isinstance(value, tuple):
        _check_items(value, where, meta)
        for i, item in enumerate(value):
            if isinstance(item, int | float) and not isinstance(item, bool):
                _check_number(item, f"{where}[{i}]", meta)
        return
    if isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(value, where, meta)


def _check_number(value: float, where: str, meta: Mapping[str, Any]) -> None:
    low = ("[", meta["ge"], value >= meta["ge"]) if meta.get("ge") is not None else None
    if meta.get("gt") is not None:
        low = ("(", meta["gt"], value > meta["gt"])
    high = ("]", meta["le"], value <= meta["le"]) if meta.get("le") is not None else None
    if meta.get("lt") is not None:
        high = (")", meta["lt"], value < meta["lt"])
    if (low is None or low[2]) and (high is None or high[2]):
        return
    # a number of a range (a rate, a probability) names the range; a count names the bound
    # it crosses (its upper bound is a typo guard, far from the values in use)
    if low and high and not isinstance(value, int):
        bound = f"lie in {low[0]}{_number(low[1])}, {_number(high[1])}{high[0]}"
    elif low and not low[2]:
        bound = f"be {'>=' if low[0] == '[' else '>'} {_number(low[1])}"
    else:
        bound = f"be {'<=' if high[0] == ']' else '<'} {_number(high[1])}"
    raise ConfigError(f"{where}: must {bound}, got {value!r}")


def _number(bound: float) -> str:
    """A bound as written: 4294967295 in full, 0.5 without trailing zeros."""
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def _check_items(value: tuple, where: str, meta: Mapping[str, Any]) -> None:
    low, high = meta.get("min_items"), meta.get("max_items")
    if low is not None and len(value) < low:
        raise ConfigError(f"{where}: needs at least {low} item(s), got {list(plain(value))}")
    if high is not None and len(value) > high:
        raise ConfigError(f"{where}: takes at most {high} item(s), got {list(plain(value))}")
    if meta.get("unique") and len(set(value)) != len(value):
        raise ConfigError(f"{where}: items must not repeat, got {list(plain(value))}")
    if meta.get("increasing") and any(b <= a for a, b in zip(value, value[1:])):
        raise ConfigError(f"{where}: must be strictly increasing, got {list(plain(value))}")
