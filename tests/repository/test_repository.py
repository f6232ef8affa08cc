"""The repository stands alone: no tracked file points at material a clone does not have, and
every relative link in the documentation resolves inside the repository."""

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# spelled in pieces so that this file does not match itself
OUTSIDE = re.compile(r"\b" + "SP" + "EC" + r"\b|\.\./" + "shared" + r"|notes/" + "FACTS")
LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)")


def tracked_text_files():
    names = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in names:
        path = REPO / name
        if path.is_file() and path.suffix not in {".png", ".gz", ".parquet"}:
            try:
                yield path, path.read_text()
            except UnicodeDecodeError:
                continue


def test_no_file_cites_material_outside_the_repository():
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path, text in tracked_text_files()
        for number, line in enumerate(text.splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not found, "references to files a clone does not have:\n" + "\n".join(found)


def test_documentation_links_resolve_inside_the_repository():
    broken = []
    for path, text in tracked_text_files():
        if path.suffix != ".md":
            continue
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            resolved = (path.parent / target).resolve()
            if REPO not in resolved.parents and resolved != REPO or not resolved.exists():
                broken.append(f"{path.relative_to(REPO)} -> {target}")
    assert not broken, "links that leave the repository or point nowhere:\n" + "\n".join(broken)


def test_the_maths_and_deviations_pages_exist_and_are_linked():
    readme = (REPO / "README.md").read_text()
    for page in ("docs/maths.md", "docs/deviations.md"):
        assert (REPO / page).stat().st_size > 2000, page
        assert f"({page})" in readme, f"README does not link {page}"
