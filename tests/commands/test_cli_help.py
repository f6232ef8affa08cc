"""`symbnn --help` and every sub-command's help: a description that is whole sentences, and a
help text for every argument and option (the parser walked, so a new command is checked too)."""

import argparse
import contextlib
import io

import pytest

from symbnn.cli import build_parser


def parsers(parser, path=("symbnn",)):
    """(command words, parser) of the root parser and every sub-command, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*path, name))


PARSERS = list(parsers(build_parser()))


def test_the_walk_finds_the_commands():
    names = {" ".join(path) for path, _ in PARSERS}
    assert {"symbnn store info", "symbnn config schema", "symbnn mmd"} <= names


@pytest.mark.parametrize("path, parser", PARSERS, ids=[" ".join(p) for p, _ in PARSERS])
def test_every_command_describes_itself_and_its_arguments(path, parser):
    description = parser.description or ""
    assert description.strip(), f"{' '.join(path)}: no description"
    first = description.strip().splitlines()[0]
    assert (first[0].isupper() or first.startswith("symbnn")) and first.rstrip().endswith("."), (
        f"{' '.join(path)}: its description opens with a cut sentence: {first!r}"
    )
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            assert all(choice.help for choice in action._choices_actions), path
        else:
            name = "/".join(action.option_strings) or action.dest
            assert action.help, f"{' '.join(path)}: {name} has no help"


@pytest.mark.parametrize("path", [p for p, _ in PARSERS], ids=[" ".join(p) for p, _ in PARSERS])
def test_help_prints_the_description(path):
    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        build_parser().parse_args([*path[1:], "--help"])
    description = dict(PARSERS)[path].description
    assert description.split()[0] in text.getvalue()
