"""Pictures of the report for the README: its first page and Table 1 at 1,400 px wide, taken
in headless Chromium (`make screenshots`; `python -m symbnn.report.screenshots REPORT FOLDER`).

The first page is pictured as a window of 1,400 x 1,000 px shows it; Table 1 (the first
experiment's) whole, as tall as it is."""

from __future__ import annotations

import argparse
import base64
import sys
import tempfile
import time
from pathlib import Path

from symbnn.report.browser import Browser, find_chromium

WIDTH, HEIGHT = 1400, 1000
FRONT_PAGE, TABLE1 = "report_front_page.png", "report_table1.png"


def take(report: Path, folder: Path, executable: str) -> list[Path]:
    """Write FRONT_PAGE and TABLE1 of `report` into `folder`; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="symbnn-screenshots-") as scratch:
        browser = Browser(executable, Path(scratch) / "profile")
        try:
            browser.resize(WIDTH, HEIGHT)
            browser.open(report.resolve().as_uri())
            time.sleep(1)  # the rule graph lays itself out after the page has loaded
            browser.screenshot(folder / FRONT_PAGE)
            entries = browser.evaluate(
                "Object.entries(results).map(([path, r]) => [path, r.data_uri])"
            )
            tables = sorted(uri for path, uri in entries if Path(path).name == "table1.html")
            if not tables:
                raise ValueError(f"{report}: no Table 1 in this report (no method was run)")
            page = Path(scratch) / "table1.html"
            page.write_bytes(base64.b64decode(tables[0].split(",", 1)[1]))
            browser.open(page.as_uri())
            height = browser.evaluate("document.documentElement.scrollHeight")
            browser.resize(WIDTH, int(height))
            browser.screenshot(folder / TABLE1)
        finally:
            browser.close()
    return [folder / FRONT_PAGE, folder / TABLE1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m symbnn.report.screenshots",
        description="Picture the report's first page and Table 1 at 1,400 px wide.",
    )
    parser.add_argument("report", type=Path, help="the report (snakemake --report FILE)")
    parser.add_argument("folder", type=Path, help="where the PNG files go (e.g. docs/img)")
    args = parser.parse_args(argv)
    executable = find_chromium()
    if executable is None:
        print(
            "screenshots: no Chromium found (Debian: apt-get install -y chromium)", file=sys.stderr
        )
        return 1
    if not args.report.is_file():
        print(f"screenshots: {args.report} does not exist (make report builds it)", file=sys.stderr)
        return 1
    try:
        paths = take(args.report, args.folder, executable)
    except ValueError as exc:
        print(f"screenshots: {exc}", file=sys.stderr)
        return 1
    print("screenshots: " + ", ".join(str(path) for path in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
