"""Headless Chromium driven through the DevTools protocol over a pipe (--remote-debugging-pipe:
JSON messages ended by a NUL byte on file descriptors 3 and 4): no browser-automation package,
the distribution's Chromium (Debian: `apt-get install -y chromium`) and the standard library.
`make screenshots` uses it to picture the report (symbnn.report.screenshots); the tests use it
to check the report renders (tests/chromium.py)."""

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
        with open(self._log, "wb") as log:  # the browser keeps its own copy of the descriptor
            self.process = subprocess.Popen(
                ["bash", "-c", wrapper, "bash", *args],  # dash reads no two-digit descriptors
                pass_fds=(to_browser_read, from_browser_write),
                stdout=subprocess.DEVNULL,
                stderr=log,
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

    def resize(self, width: int, height: int) -> None:
        """The page's viewport, e.g. as tall as a page to picture it whole."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

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
