"""docs/configuration.md is what `symbnn.settings.reference` writes from the settings layer."""

import dataclasses

from conftest import REPO

from symbnn.docblocks import parse_blocks
from symbnn.settings import reference
from symbnn.settings.base import is_internal
from symbnn.settings.workflow import Experiment


def written_block() -> str:
    text = (REPO / reference.DOC).read_text()
    (block,) = [b for b in parse_blocks(text, reference.DOC) if b.name == reference.BLOCK]
    return "\n".join(text.splitlines()[block.begin + 1 : block.end]) + "\n"


def test_the_page_is_what_the_settings_layer_writes():
    assert written_block() == reference.reference(), (
        "docs/configuration.md differs from the settings: run python -m symbnn.settings.reference"
    )


def test_every_key_of_an_experiment_is_documented():
    page = written_block()
    for f in dataclasses.fields(Experiment):
        if not is_internal(f):
            assert f"| `{f.name}` |" in page, f.name


def test_the_rules_reading_a_section_are_found_in_the_rules():
    readers = reference.rules_reading()
    assert {"train_shard", "train_plateau", "train_pool_shard", "fit"} <= set(readers["recipe"])
    assert "mmd_method" in readers["mmd"] and "canonicalize" in readers["symmetry"]
    assert "train_shard" not in readers["mmd"]
    # resources never change a result, so no rule's params read them
    assert readers["compute"] == []


def test_types_bounds_and_defaults_are_shown_as_a_reader_needs_them():
    entry = {"anyOf": [{"type": "integer", "minimum": 2, "maximum": 10}, {"type": "null"}]}
    assert reference.type_text(entry) == "int \\| none"
    assert reference.bounds_text(entry) == ">= 2, <= 10"
    assert reference.bounds_text({"type": "array", "minItems": 1}) == "at least 1 item"
    assert reference.default_text({"default": None}) == "none"
    assert reference.default_text({}) == "required"
