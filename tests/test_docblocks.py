import pytest

from symbnn.docblocks import DocBlockError, parse_blocks, write_block


def test_write_block_appends_then_replaces_in_place(tmp_path):
    doc = tmp_path / "bench.md"
    doc.write_text("# Speed\n\nIntro.\n")
    write_block(
        doc, "table", "benchmarks/x.py", "| a |\n| 1 |", commit="abcdef1", date="2026-01-02"
    )
    write_block(doc, "other", "benchmarks/y.py", "B", commit="abcdef1", date="2026-01-02")
    write_block(
        doc, "table", "benchmarks/x.py", "| a |\n| 2 |", commit="1234567", date="2026-01-03"
    )
    text = doc.read_text()
    assert text.startswith("# Speed\n\nIntro.\n\n<!-- BEGIN GENERATED table by benchmarks/x.py")
    assert "| 1 |" not in text and "| 2 |" in text and "(commit 1234567, 2026-01-03)" in text
    blocks = parse_blocks(text)
    assert [b.name for b in blocks] == ["table", "other"]
    assert blocks[0].script == "benchmarks/x.py" and blocks[1].commit == "abcdef1"


@pytest.mark.parametrize(
    "text, problem",
    [
        ("<!-- BEGIN GENERATED a by s.py (commit abcdef1, 2026-01-01) -->\nx\n", "never closed"),
        ("<!-- END GENERATED a -->\n", "without its BEGIN"),
        ("<!-- BEGIN GENERATED a by s.py -->\n", "malformed"),
        (
            "<!-- BEGIN GENERATED a by s.py (commit abcdef1, 2026-01-01) -->\n"
            "<!-- END GENERATED a -->\n" * 2,
            "named twice",
        ),
    ],
)
def test_malformed_blocks_are_named(text, problem):
    with pytest.raises(DocBlockError, match=problem):
        parse_blocks(text, "doc.md")
