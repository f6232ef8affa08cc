"""The report's captions (report/*.rst) render as Snakemake renders them (Jinja, then
docutils to HTML) without a docutils system message: a stray `|G|` reads as an undefined
substitution and the report shows "Docutils System Messages" under the caption."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from docutils.core import publish_parts
from jinja2 import Environment

REPO = Path(__file__).resolve().parents[2]
CAPTIONS = sorted((REPO / "report").glob("*.rst"))


def rendered(text: str) -> str:
    """`text` as the report's HTML: Jinja with a job's `snakemake` object, then docutils."""
    snakemake = SimpleNamespace(
        wildcards=SimpleNamespace(experiment="tiny"), config={}, params={}, input=[], output=[]
    )
    text = Environment().from_string(text).render(snakemake=snakemake, categories={}, files={})
    return publish_parts(text, writer="html", settings_overrides={"warning_stream": False})[
        "html_body"
    ]


def test_there_are_captions():
    assert len(CAPTIONS) > 20


@pytest.mark.parametrize("caption", CAPTIONS, ids=lambda p: p.name)
def test_caption_renders_without_a_docutils_message(caption):
    assert "System Message" not in rendered(caption.read_text())


def test_a_bare_substitution_is_caught():
    assert "System Message" in rendered("the order |G| of the group")
