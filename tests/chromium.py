"""The report checked in a real headless Chromium (symbnn.report.browser drives it through the
DevTools protocol over a pipe: no browser-automation package), and Chromium found or
installed for a test."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

from symbnn.report.browser import Browser, find_chromium

__all__ = ["Browser", "check_report", "chromium_or_skip", "find_chromium"]

LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
# wait for the image the report shows, then report its size (0 when it did not decode)
IMAGE_SIZE = """new Promise(resolve => setTimeout(() => {
  const img = document.querySelector('img[src^="data:image"]');
  if (!img) { resolve(-1); return; }
  img.decode().then(() => resolve(img.naturalWidth), () => resolve(0));
}, 200))"""
# in the page's first table: click the first header with a direction mark (else the last)
# twice; that column's numbers (first of each cell) after each click, and the header's sort state
SORT_TWICE = """(() => {
  const table = document.querySelector('table.symbnn');
  const heads = Array.from(table.querySelectorAll('th'));
  const th = heads.find(h => /[\\u2193\\u2191]/.test(h.textContent)) || heads[heads.length - 1];
  const column = th.cellIndex, numbers = () => Array.from(
    table.querySelectorAll('tbody tr'), r => parseFloat(r.cells[column].textContent)
  ).filter(n => !isNaN(n));
  th.click(); const up = numbers(), first = th.getAttribute('aria-sort');
  th.click(); return [up, numbers(), first, th.getAttribute('aria-sort')];
})()"""


def _ordered(values: list[float], descending: bool = False) -> bool:
    return values == sorted(values, reverse=descending)


def check_report(browser: Browser, report: Path, shots: Path) -> dict:
    """Open Snakemake's `report` and every entry in it; screenshots go to `shots`. Returns
    {"categories": [...], "entries": {path: mime type}}; fails on a console error, a request
    leaving the machine, an unlabelled entry, an image that does not decode or a table that
    does not render or sort."""
    browser.open(report.resolve().as_uri())
    text = browser.evaluate("document.body.innerText")
    browser.screenshot(shots / "first_page.png")
    categories = browser.evaluate("Object.keys(categories)")
    entries = browser.evaluate(
        "Object.entries(results).map(([p, r]) => [p, r.mime_type, r.labels, r.data_uri])"
    )
    assert text and entries, "the report shows nothing"
    for number, (path, mime, labels, data_uri) in enumerate(entries):
        assert labels, f"{path}: no labels (the report lists it by its file name)"
        shot = shots / f"{number:02d}_{Path(path).name}.png"
        if mime.startswith("image/"):
            browser.evaluate(
                f"app.setView({{content: 'img', contentPath: {json.dumps(data_uri)}}})"
            )
            assert browser.evaluate(IMAGE_SIZE) > 0, f"{path}: the image does not render"
            browser.screenshot(shot)
        elif mime == "text/html":
            page = shots / f"{number:02d}_{Path(path).name}"
            page.write_bytes(base64.b64decode(data_uri.split(",", 1)[1]))
            browser.open(page.as_uri())
            assert browser.evaluate("document.querySelectorAll('tbody tr').length") > 0, path
            if browser.evaluate("!!document.querySelector('table.symbnn')"):
                up, down, first, second = browser.evaluate(SORT_TWICE)
                assert (first, second) == ("ascending", "descending"), path
                assert _ordered(up) and _ordered(down, descending=True), (path, up, down)
            browser.screenshot(shot)
            browser.open(report.resolve().as_uri())
    errors = browser.errors()
    assert not errors, f"console errors: {errors}"
    outside = [url for url in browser.requests() if not url.startswith(LOCAL_SCHEMES)]
    assert not outside, f"requests leaving the machine: {outside}"
    return {"text": text, "categories": categories, "entries": {p: m for p, m, _, _ in entries}}


def chromium_or_skip() -> str:
    """The Chromium executable; installed from the distribution's packages when missing (as
    root with apt-get), else the calling test is skipped, saying why."""
    import pytest

    found = find_chromium()
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("no Chromium here, and installing one needs root and apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        if result.returncode != 0:
            pytest.skip(f"cannot install Chromium: {' '.join(cmd)}: {result.stderr[-500:]}")
    return find_chromium() or pytest.skip("Chromium installed but not found on PATH")
