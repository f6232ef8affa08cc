"""Generated blocks: the one way a figure from a run or a benchmark enters README.md or docs/.

A script that measures or computes something writes its table into a Markdown file between two
markers that name the block, the script, the commit and the date::

    <!-- BEGIN GENERATED train-throughput by benchmarks/train_throughput.py (commit 1a2b3c4, 2026-11-25) -->
    | trainer | K | ... |
    <!-- END GENERATED train-throughput -->

Rerunning the script replaces the block in place (or appends it when the file has none of
that name); nothing else in the file changes, and a block whose text is the same keeps its
marker (the commit that wrote it). `tests/repository/test_docs_figures.py` checks that every
block's script exists and names the block, and that no run figure stands outside a block.

`make docs` (``python -m symbnn.docblocks``) reruns every block written from the code (a
script under src/, such as docs/configuration.md's by `symbnn.settings.reference`) and lists
the measured ones (a script under benchmarks/), which only their benchmark's run rewrites.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from symbnn.atomic import atomic_write

BEGIN = re.compile(
    r"^<!-- BEGIN GENERATED (?P<name>[\w.-]+) by (?P<script>\S+) "
    r"\(commit (?P<commit>[0-9a-f]{7,40}|unknown), (?P<date>\d{4}-\d{2}-\d{2})\) -->$"
)
END = re.compile(r"^<!-- END GENERATED (?P<name>[\w.-]+) -->$")
# a line that looks like a marker but does not parse is an error, not prose
MARKER = re.compile(r"^<!-- (BEGIN|END) GENERATED")


class DocBlockError(ValueError):
    """A Markdown file's generated blocks are malformed (the message names file and line)."""


@dataclass(frozen=True)
class Block:
    name: str
    script: str
    commit: str
    date: str
    begin: int  # 0-based line index of the BEGIN marker
    end: int  # 0-based line index of the END marker


def parse_blocks(text: str, source: str | os.PathLike = "<text>") -> list[Block]:
    """The generated blocks of a Markdown text, in order; DocBlockError on a marker that does
    not parse, a block left open, an END without its BEGIN, or a name used twice."""
    blocks: list[Block] = []
    open_at: tuple[int, re.Match] | None = None
    for i, line in enumerate(text.splitlines()):
        if not MARKER.match(line):
            continue
        begin, end = BEGIN.match(line), END.match(line)
        if begin is None and end is None:
            raise DocBlockError(f"{source}, line {i + 1}: malformed generated-block marker")
        if begin is not None:
            if open_at is not None:
                raise DocBlockError(
                    f"{source}, line {i + 1}: block {begin['name']!r} starts inside block "
                    f"{open_at[1]['name']!r} (line {open_at[0] + 1})"
                )
            open_at = (i, begin)
            continue
        if open_at is None or open_at[1]["name"] != end["name"]:
            raise DocBlockError(
                f"{source}, line {i + 1}: END of block {end['name']!r} without its BEGIN"
            )
        start, match = open_at
        blocks.append(
            Block(match["name"], match["script"], match["commit"], match["date"], start, i)
        )
        open_at = None
    if open_at is not None:
        raise DocBlockError(
            f"{source}, line {open_at[0] + 1}: block {open_at[1]['name']!r} is never closed"
        )
    names = [b.name for b in blocks]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise DocBlockError(f"{source}: generated block(s) named twice: {', '.join(twice)}")
    return blocks


def current_commit(repository: str | os.PathLike | None = None) -> str:
    """The checkout's short commit, or 'unknown' outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=7", "HEAD"],
            cwd=repository or Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def render_block(name: str, script: str, body: str, commit: str, date: str) -> str:
    header = f"<!-- BEGIN GENERATED {name} by {script} (commit {commit}, {date}) -->"
    return f"{header}\n{body.strip(chr(10))}\n<!-- END GENERATED {name} -->"


def write_block(
    path: str | os.PathLike,
    name: str,
    script: str,
    body: str,
    *,
    commit: str | None = None,
    date: str | None = None,
) -> Path:
    """Put ``body`` into the block ``name`` of the Markdown file ``path`` (atomically): replaced
    where the block is, appended at the end otherwise (the file is created if missing).
    ``script`` is the path, relative to the repository root, of the script that wrote it."""
    path = Path(path)
    text = path.read_text() if path.exists() else ""
    block = render_block(
        name,
        script,
        body,
        commit or current_commit(path.parent),
        date or datetime.date.today().isoformat(),
    )
    found = {b.name: b for b in parse_blocks(text, path)}
    lines = text.splitlines()
    if name in found:
        old = found[name]
        if lines[old.begin + 1 : old.end] == block.splitlines()[1:-1]:
            return path  # the same text: its marker still names the commit that wrote it
        lines[old.begin : old.end + 1] = block.splitlines()
        new = "\n".join(lines) + "\n"
    else:
        new = (text.rstrip("\n") + "\n\n" if text.strip() else "") + block + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(new))
    return path


def documents(root: Path) -> list[Path]:
    """The Markdown files that may hold generated blocks: README.md and docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def regenerate(root: Path) -> tuple[list[str], list[str]]:
    """Rerun, in ``root``, the script of every block written from the code (a module under
    src/, run as ``python -m``): (the scripts rerun, the measured blocks left as they are)."""
    from_code: dict[str, None] = {}
    measured = []
    for path in documents(root):
        for block in parse_blocks(path.read_text(), path) if path.exists() else ():
            if block.script.startswith("src/") and block.script.endswith(".py"):
                from_code[block.script] = None
            else:
                measured.append(f"{block.name} by {block.script} ({path.relative_to(root)})")
    for script in from_code:
        module = script.removeprefix("src/").removesuffix(".py").replace("/", ".")
        subprocess.run([sys.executable, "-m", module], cwd=root, check=True)
    return list(from_code), measured


def main() -> None:
    root = Path.cwd()
    rerun, measured = regenerate(root)
    print(f"docs: rewrote the blocks of {', '.join(rerun)} (unchanged text keeps its marker)")
    print(f"docs: {len(measured)} measured blocks left as they are, each rewritten by its run:")
    for line in measured:
        print(f"  {line}")


__all__ = [
    "Block",
    "DocBlockError",
    "documents",
    "parse_blocks",
    "regenerate",
    "render_block",
    "write_block",
]

if __name__ == "__main__":
    main()
