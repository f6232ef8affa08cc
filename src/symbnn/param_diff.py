"""What changed between the params a job last ran with and those it would run with now, setting
by setting: ``fit.settings.rate 0.2 -> 0.3`` rather than two whole dicts.

Snakemake records a job's params as the sorted reprs of their values, without their names,
and a rerun's reason holds the reprs found only in the record and only now. The recorded
reprs are read back with `ast.literal_eval` (literals only: a record never runs code); the
new ones carry the names the rule gives them. Each new param is paired with the recorded
value most like it (same type; for dicts, the most keys in common), then the two are compared
key by key."""

from __future__ import annotations

import ast
from typing import Any

# Differences shown per job before "+N more", and the width of one value shown.
MAX_SHOWN = 4
VALUE_WIDTH = 40


class _Absent:
    """A key present on one side only."""

    def __repr__(self) -> str:
        return "(none)"


ABSENT = _Absent()
UNREADABLE = object()


def recorded_value(text: str) -> Any:
    """The value a recorded repr stands for, or UNREADABLE (an object's repr, inf, nan)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return UNREADABLE


def differences(old: Any, new: Any, path: str) -> list[tuple[str, Any, Any]]:
    """(dotted path, old, new) of every leaf that differs; dicts by key (in the old order,
    then the new keys), lists and tuples of one length by position. Values are compared by
    repr, as Snakemake compares them (1 and 1.0 differ)."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in [*old, *(k for k in new if k not in old)]:
            inner = f"{path}.{key}" if path else str(key)
            found += differences(old.get(key, ABSENT), new.get(key, ABSENT), inner)
        return found
    if (
        isinstance(old, list | tuple)
        and type(old) is type(new)
        and len(old) == len(new)
        and repr(old) != repr(new)
    ):
        found = []
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            found += differences(a, b, f"{path}[{index}]")
        return found
    return [] if repr(old) == repr(new) else [(path, old, new)]


def shown(value: Any) -> str:
    """A value in a few characters: its repr, or its size when that is too long."""
    text = repr(value)
    if len(text) <= VALUE_WIDTH:
        return text
    if isinstance(value, list | tuple | set | dict):
        kind = "keys" if isinstance(value, dict) else "items"
        return f"<{len(value)} {kind}>"
    return text[: VALUE_WIDTH - 3] + "..."


def _likeness(old: Any, new: Any) -> int:
    """How alike two param values look (0: not a pair): keys in common for dicts."""
    if isinstance(old, dict) and isinstance(new, dict):
        return len(old.keys() & new.keys())
    return 1 if type(old) is type(new) else 0


def paired(
    only_old: list[str], only_new: list[tuple[str, str]], complete: bool = True
) -> list[tuple[str, Any, Any]]:
    """(name, old value, new value) for each changed param: ``only_new`` as (name, repr),
    each paired with the most alike of ``only_old`` (ABSENT where none is left). A recorded
    value left over is a param no longer given, unless the new ones are not ``complete``
    (some are known only later)."""
    left = [recorded_value(text) for text in only_old]
    pairs = []
    for name, text in only_new:
        new = recorded_value(text)
        scores = [_likeness(old, new) for old in left]
        if scores and (max(scores) > 0 or (len(left) == 1 and len(only_new) == 1)):
            pairs.append((name, left.pop(scores.index(max(scores))), new))
        else:
            pairs.append((name, ABSENT, new))
    if complete:
        pairs += [("(a param no longer given)", old, ABSENT) for old in left]
    return pairs


def changed_params(
    only_old: list[str], only_new: list[tuple[str, str]], complete: bool = True
) -> list[str]:
    """``path old -> new`` for every setting that differs, the param's name first (at most
    MAX_SHOWN, then "+N more"); ``complete`` as for `paired`."""
    lines = []
    for name, old, new in paired(sorted(only_old), only_new, complete):
        if old is UNREADABLE or new is UNREADABLE:
            lines.append(f"{name} changed")
            continue
        for path, a, b in differences(old, new, name):
            lines.append(f"{path} {shown(a)} -> {shown(b)}")
    if len(lines) > MAX_SHOWN:
        lines = [*lines[:MAX_SHOWN], f"+{len(lines) - MAX_SHOWN} more"]
    return lines
