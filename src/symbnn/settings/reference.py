"""docs/configuration.md: every configuration key with its type, default, bounds and meaning,
written from the settings sections (through their JSON schema, `symbnn.settings.schema`), and
for each section of an experiment the workflow rules whose params read it.

    python -m symbnn.settings.reference          # rewrites the block `configuration`

`tests/settings/test_configuration_doc.py` fails when the page differs from what this writes, so the
page cannot drift from the settings layer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from symbnn.docblocks import write_block
from symbnn.settings.schema import config_schema

BLOCK, DOC, SCRIPT = "configuration", "docs/configuration.md", "src/symbnn/settings/reference.py"
REPO = Path(__file__).resolve().parents[3]
# the experiment-level sections a rule's params can read
_SECTIONS = (
    "data",
    "model",
    "recipe",
    "posterior",
    "compute",
    "symmetry",
    "mmd",
    "methods",
    "metrics",
    "collapse",
    "alignment",
    "reference",
)


def type_text(schema: dict[str, Any]) -> str:
    """A short type for a schema: `int`, `"a" | "b"`, `list of float`, a section's name."""
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " \\| ".join(type_text(arm) for arm in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(f"`{value}`" for value in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        if "prefixItems" in schema:
            return "(" + ", ".join(type_text(item) for item in schema["prefixItems"]) + ")"
        return f"list of {type_text(schema.get('items', {}))}"
    if kind == "object":
        extra = schema.get("additionalProperties")
        return f"map to {type_text(extra)}" if isinstance(extra, dict) else "map"
    names = {"integer": "int", "number": "float", "boolean": "bool", "string": "str"}
    return names.get(kind, "none" if kind == "null" else "any")


def bounds_text(schema: dict[str, Any]) -> str:
    """The bounds of a schema and of its arms: `>= 1, <= 100`, `1-3 items`, a pattern."""
    parts: list[str] = []
    for arm in schema.get("anyOf", [schema]):
        for key, sign in (
            ("minimum", ">="),
            ("exclusiveMinimum", ">"),
            ("maximum", "<="),
            ("exclusiveMaximum", "<"),
        ):
            if key in arm:
                parts.append(f"{sign} {arm[key]:g}")
        for key, word in (("minItems", "at least"), ("maxItems", "at most")):
            if key in arm and "prefixItems" not in arm:
                count = arm[key]
                parts.append(f"{word} {count} item{'s' if count != 1 else ''}")
        if "pattern" in arm:
            parts.append(f"matches `{arm['pattern']}`")
    return ", ".join(parts)


def default_text(schema: dict[str, Any]) -> str:
    if "default" not in schema:
        return "required"
    value = schema["default"]
    if isinstance(value, dict) and value:
        return "its section's defaults"
    return "none" if value is None else f"`{value}`" if value != "" else "`''`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def section_table(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [schema["description"][0].upper() + schema["description"][1:] + ".", ""]
    lines += ["| key | type | default | bounds | meaning |", "|---|---|---|---|---|"]
    for key, field in schema.get("properties", {}).items():
        meaning = _cell(field.get("description", ""))
        lines.append(
            f"| `{key}` | {type_text(field)} | {default_text(field)} | "
            f"{_cell(bounds_text(field))} | {meaning} |"
        )
    if schema.get("additionalProperties") not in (False, None):
        lines.append("| (any other key) | | | | passed to the model's or dataset's constructor |")
    return lines + [""]


def _functions(source: str) -> dict[str, str]:
    """The top-level functions of a source text: name -> body text (up to the next line that
    is not indented)."""
    return dict(re.findall(r"^def (\w+)\((.*?)(?=^[^\s)]|\Z)", source, flags=re.M | re.S))


def _sections_read(text: str, functions: dict[str, str], seen: set[str]) -> set[str]:
    """The experiment sections a params text reads: attribute access `.recipe`,
    `section_params("mmd", ...)`, `methods_of(...)`, and those of the params functions
    it calls (followed once each)."""
    read = {s for s in _SECTIONS if re.search(rf"\.{s}\b", text)}
    read |= set(re.findall(r'section_params\("(\w+)"', text))
    if "methods_of(" in text:
        read.add("methods")
    for called in re.findall(r"\b(\w+)(?:\(|,|$)", text, flags=re.M):
        if called in functions and called not in seen:
            seen.add(called)
            read |= _sections_read(functions[called], functions, seen)
    return read & set(_SECTIONS)


def rules_reading(repo: Path = REPO) -> dict[str, list[str]]:
    """Experiment section -> the rules whose params read it (from rules/*.smk): changing a
    key of the section reruns those jobs, and Snakemake then reruns what reads their outputs."""
    # the params functions: the rule files' glue and the planning library it calls
    # (src/symbnn/plan), whose functions have the names the rules use
    sources = [repo / "rules" / "common.smk", *sorted((repo / "src/symbnn/plan").glob("*.py"))]
    functions = {}
    for source in sources:
        functions.update(_functions(source.read_text()))
    readers: dict[str, set[str]] = {s: set() for s in _SECTIONS}
    for smk in sorted((repo / "rules").glob("*.smk")):
        for plain, derived, body in re.findall(
            r"^(?:rule (\w+)|use rule \w+ as (\w+) with):\n(.*?)(?=^rule |^use rule |\Z)",
            smk.read_text(),
            flags=re.M | re.S,
        ):
            rule = plain or derived
            params = re.search(r"^    params:\n((?:        .*\n|\s*\n)*)", body, flags=re.M)
            if params is None:
                continue
            for section in _sections_read(params.group(1), functions, set()):
                readers[section].add(rule)
    return {section: sorted(rules) for section, rules in readers.items()}


def reference() -> str:
    """The generated part of docs/configuration.md."""
    schema = config_schema()
    lines = ["## The top level", ""]
    lines += section_table("config.yaml", schema)[2:]
    readers = rules_reading()
    lines += ["## An experiment's sections", ""]
    lines += [
        "Changing a key of a section reruns the jobs of the rules that read it; Snakemake then "
        "reruns what reads their outputs.",
        "",
    ]
    lines += ["| section | read by the rules |", "|---|---|"]
    for section, rules in readers.items():
        names = ", ".join(f"`{rule}`" for rule in rules) or "none (resources only)"
        lines.append(f"| `{section}` | {names} |")
    lines.append("")
    for name, definition in schema["$defs"].items():
        lines += section_table(name, definition)
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    write_block(REPO / DOC, BLOCK, SCRIPT, reference())
    print(f"wrote the block {BLOCK!r} of {DOC}")


if __name__ == "__main__":
    main()
