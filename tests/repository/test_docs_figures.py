"""No figure from a run is typed into README.md or docs/ by hand.

A number that comes from a run or a benchmark lives in the report, or inside a generated block
(`symbnn.docblocks`) written by the script that measured it. This test checks every block's
script exists and names the block, and flags prose that carries a run figure outside a block:
a number with a unit of time, size, speed or information, a speed-up ("3.1x"), a decimal
number or a percentage, close to a word that names a result (accuracy, MMD, took, median,
faster, peak, ...).

What is not a run figure and so is passed over: settings, constants and code (inline `code`
spans and fenced blocks), LaTeX maths ($...$), section numbers ("section 5.2", "### 6.1"),
values quoted from the paper or the authors' release, and estimates (a line that says so).
"""

import re
from pathlib import Path

import pytest

from symbnn.docblocks import parse_blocks

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

RESULT_WORDS = (
    r"accuracy|accuracies|acc|mmd|barriers?|loss|nll|ece|brier|aupr|fpr95|mi|idmi|oodmi|"
    r"correlation|median|mean|range|took|takes|ran|reached|reaches|converged|faster|slower|"
    r"speed|speed-up|overhead|rejects?|rejected|elbo|gains?|gaps?|r|p|tau|model-steps|"
    r"throughput|wall|cpu|peak|rss|closest|apart|dropped|runs|costs?"
)
RESULT = re.compile(rf"\b(?:{RESULT_WORDS})\b", re.I)
NUMBER = r"\d[\d,]*(?:\.\d+)?"
UNIT = (
    r"ms|us|µs|s|sec|seconds?|min|minutes?|h|hours?|[KMGT]i?B|[KMG]B/s|[GT]FLOP/s|nats|"
    r"GPU-hours?|CPU-hours?"
)
WITH_UNIT = re.compile(rf"(?<![\w.^/-]){NUMBER} ?(?:{UNIT})(?![\w/])")
SPEED_UP = re.compile(r"(?<![\w.^/-])\d+(?:\.\d+)?x(?![\w])")  # 3.1x, 20x
PERCENT = re.compile(rf"(?<![\w.^/-]){NUMBER} ?%")
DECIMAL = re.compile(r"(?<![\w.^/-])-?\d+\.\d+(?![\w.^])")
# what precedes a decimal that is a section, figure or equation number, not a figure
SECTION = re.compile(
    r"(?:(?i:section|sections|maths|paper|figure|table|appendix|eq\.?|equation)|#+|§|\b[A-Z])"
    r"\s*\(?$"
)
QUOTES_THE_PAPER = re.compile(
    r"\bpaper(?:'s)?\b|\bthe authors\b|\breleased?\b|\bestimates?\b", re.I
)
NOT_PROSE = re.compile(r"`[^`]*`|\$[^$]*\$|\]\([^)]*\)|https?://\S+")
WINDOW = 45  # characters either side of a number searched for a result word


def run_figures(line: str) -> list[str]:
    """The run figures a line of prose carries (empty when it carries none)."""
    if QUOTES_THE_PAPER.search(line):
        return []
    prose = NOT_PROSE.sub(" ", line)
    found = []
    for pattern in (WITH_UNIT, SPEED_UP, PERCENT, DECIMAL):
        for m in pattern.finditer(prose):
            if pattern is DECIMAL and SECTION.search(prose[max(0, m.start() - 14) : m.start()]):
                continue
            window = prose[max(0, m.start() - WINDOW) : m.end() + WINDOW]
            if RESULT.search(window):
                found.append(m.group())
    return found


def prose_lines(text: str):
    """(line number, line) of the text outside generated blocks and fenced code blocks."""
    inside = set()
    for block in parse_blocks(text):
        inside.update(range(block.begin, block.end + 1))
    fenced = False
    for i, line in enumerate(text.splitlines()):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced and i not in inside:
            yield i + 1, line


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_generated_blocks_name_an_existing_script(doc):
    for block in parse_blocks(doc.read_text(), doc):
        script = REPO / block.script
        assert script.is_file(), f"{doc.name}: block {block.name!r} names {block.script}, missing"
        assert block.name in script.read_text(), (
            f"{doc.name}: block {block.name!r}: {block.script} does not name it, so it cannot "
            "have written it"
        )


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_run_figure_outside_generated_blocks(doc):
    typed = [
        f"{doc.relative_to(REPO)}:{number}: {', '.join(figures)} | {line.strip()[:100]}"
        for number, line in prose_lines(doc.read_text())
        if (figures := run_figures(line))
    ]
    assert not typed, "run figures typed by hand (move them into a generated block):\n" + "\n".join(
        typed
    )


@pytest.mark.parametrize(
    "line",
    [
        "With 12 epochs all 64 converge: median test accuracy 0.80, range 0.52-0.90.",
        "`make run` took 10.5 minutes with the install.",
        "(our run: r = 0.18, p = 0.056)",
        "the batched path runs 3.1x the loop",
        "3-10% of the tests reject at 0.05",
        "peak 1.44 GiB at d=1e6",
    ],
)
def test_run_figures_are_recognized(line):
    assert run_figures(line)


@pytest.mark.parametrize(
    "line",
    [
        "plain SGD at lr 0.04, weight decay 2e-4, halved at epochs 15 and 30",
        "a network is kept when its test accuracy is at least `min_accuracy: 0.5`",
        "### 6.1 Accuracy",
        "the paper's Table 1 gives an MMD of 0.21 for SWAG",
        "see section 5.2 for the accuracy of the sort",
        "images pooled to 7 x 7 pixels, 4,000 training images",
        "a prior $\\mathcal{N}(0, 0.1^2)$ on every weight",
    ],
)
def test_settings_sections_and_the_papers_values_are_not_run_figures(line):
    assert not run_figures(line)
