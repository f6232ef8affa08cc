import pytest

from symbnn.docblocks import DocBlockError, parse_blocks, regenerate, write_block


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


def test_the_same_text_keeps_the_marker_of_the_commit_that_wrote_it(tmp_path):
    doc = tmp_path / "page.md"
    write_block(doc, "t", "src/pkg/gen.py", "| a |", commit="abcdef1", date="2026-01-02")
    before = doc.read_text()
    write_block(doc, "t", "src/pkg/gen.py", "| a |", commit="1234567", date="2026-01-03")
    assert doc.read_text() == before
    write_block(doc, "t", "src/pkg/gen.py", "| b |", commit="1234567", date="2026-01-03")
    assert "(commit 1234567, 2026-01-03)" in doc.read_text()


def test_make_docs_reruns_the_blocks_written_from_the_code_and_lists_the_measured(tmp_path):
    """`regenerate` runs each block's script under src/ as a module (here one that writes
    its block), and leaves a benchmark's block as it is."""
    (tmp_path / "src" / "gen").mkdir(parents=True)
    (tmp_path / "src" / "gen" / "__init__.py").write_text("")
    (tmp_path / "src" / "gen" / "page.py").write_text(
        "from symbnn.docblocks import write_block\n"
        "write_block('docs/page.md', 'page', 'src/gen/page.py', '| new |')\n"
    )
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# Page\n")
    write_block(tmp_path / "docs" / "page.md", "page", "src/gen/page.py", "| old |")
    write_block(tmp_path / "docs" / "page.md", "speed", "benchmarks/speed.py", "| 1 s |")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", str(tmp_path / "src"))
        rerun, measured = regenerate(tmp_path)
    text = (tmp_path / "docs" / "page.md").read_text()
    assert "| new |" in text and "| old |" not in text and "| 1 s |" in text
    assert rerun == ["src/gen/page.py"]
    assert measured == ["speed by benchmarks/speed.py (docs/page.md)"]
