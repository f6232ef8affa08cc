"""Headless Chromium driven through the DevTools protocol over a pipe (--remote-debugging-pipe:
JSON messages ended by a NUL byte on file descriptors 3 and 4), so that a test needs no
browser-automation package: the distribution's Chromium and the standard library."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

CANDIDATES = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        path = name if os.path.isabs(name) and os.access(name, os.X_OK) else shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless browser with one page; every console error, uncaught exception and
    network request of the page is recorded."""

    def __init__(self, executable: str, profile: Path):
        self._log = profile.parent / "chromium.log"  # its messages, for a failure
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()
        # the child's ends moved above 9, so that the redirections to 3 and 4 below cannot
        # overwrite one of them (pipes opened in a quiet process get descriptors 3 and 4)
        low = (to_browser_read, from_browser_write)
        to_browser_read, from_browser_write = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in low)
        for fd in low:
            os.close(fd)
        args = [
            executable,
            "--headless=new",
            "--no-sandbox",  # tests run as root
            "--disable-gpu",
            "--no-first-run",
            "--window-size=1400,1000",
            f"--user-data-dir={profile}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        # the browser reads commands on fd 3 and writes answers on fd 4
        wrapper = f'exec "$@" 3<&{to_browser_read} 4>&{from_browser_write}'
        self.process = subprocess.Popen(
            ["bash", "-c", wrapper, "bash", *args],  # dash reads no two-digit descriptors
            pass_fds=(to_browser_read, from_browser_write),
            stdout=subprocess.DEVNULL,
            stderr=open(self._log, "wb"),
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                log = self._log.read_text(errors="replace")[-1500:] if self._log.exists() else ""
                raise RuntimeError(f"Chromium closed the DevTools pipe; its messages:\n{log}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: bool = False, timeout: float = 60, **params) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_for_event(self, method: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        seen = len(self.events)
        while True:
            for event in self.events[seen:]:
                if event.get("method") == method:
                    return event
            seen = len(self.events)
            self.events.append(self._read_message(deadline))

    def open(self, url: str) -> None:
        self.call("Page.navigate", session=True, url=url)
        self.wait_for_event("Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.call(
            "Runtime.evaluate",
            session=True,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def errors(self) -> list[str]:
        """Console errors and uncaught exceptions of the page so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                found.append(" ".join(str(a.get("value", a)) for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                found.append(str(params["exceptionDetails"].get("exception", params)))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(params["entry"].get("text", ""))
        return found

    def requests(self) -> list[str]:
        """The URL of every request the page made."""
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close", timeout=10)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


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
