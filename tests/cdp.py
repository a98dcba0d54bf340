"""Drive headless Chromium over the DevTools protocol on a pipe (fds 3 and 4).

``--remote-debugging-pipe`` needs no port and no websocket client: Chromium reads
NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, executable: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="harness-chromium-")
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()

        def wire() -> None:  # runs in the child: put the pipe ends on fds 3 and 4
            high_in, high_out = os.dup(to_child), os.dup(from_child)
            os.dup2(high_in, 3)
            os.dup2(high_out, 4)

        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(3, 4),
            preexec_fn=wire,
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply from chromium")
            ready, _, _ = select.select([self._read], [], [], left)
            if ready:
                chunk = os.read(self._read, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self._receive(deadline)
            self.events.append(event)
            if event.get("method") == method:
                return event

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close", timeout=10)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()
        os.close(self._write)
        os.close(self._read)
        shutil.rmtree(self.profile, ignore_errors=True)


def console_errors(events: list[dict[str, Any]]) -> list[str]:
    errors = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text", "")
            errors.append(f"exception: {text}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            errors.append(f"console.{params['type']}: {args}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            errors.append(f"log: {params['entry'].get('text', '')}")
    return errors


def load_page(executable: str, page: Path, script: str) -> tuple[Any, list[str]]:
    """Open ``page``, wait for load, evaluate ``script``; return (value, console errors)."""
    browser = Browser(executable)
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            browser.call(domain, session=session)
        browser.call("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
        browser.wait_for("Page.loadEventFired")
        result = browser.call(
            "Runtime.evaluate", {"expression": script, "returnByValue": True}, session=session
        )
        # Give late console messages a moment to arrive before closing.
        browser.call("Runtime.evaluate", {"expression": "1"}, session=session)
        value = result.get("result", {}).get("value")
        return value, console_errors(browser.events)
    finally:
        browser.close()


class Page:
    """One tab at a fixed viewport: evaluate scripts, take screenshots, read console errors."""

    def __init__(self, browser: Browser, width: int, height: int) -> None:
        self.browser = browser
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            browser.call(domain, session=self.session)
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=self.session,
        )

    def open(self, page: Path) -> None:
        self.browser.events = [
            e for e in self.browser.events if e.get("method") != "Page.loadEventFired"
        ]
        self.browser.call("Page.navigate", {"url": page.resolve().as_uri()}, session=self.session)
        self.browser.wait_for("Page.loadEventFired")

    def evaluate(self, script: str) -> Any:
        result = self.browser.call(
            "Runtime.evaluate", {"expression": script, "returnByValue": True}, session=self.session
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def screenshot(self, path: Path) -> Path:
        import base64

        data = self.browser.call("Page.captureScreenshot", {"format": "png"}, session=self.session)
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def errors(self) -> list[str]:
        self.evaluate("1")  # let late console messages arrive
        return console_errors(self.browser.events)


@contextlib.contextmanager
def open_page(executable: str, page: Path, width: int, height: int) -> Any:
    browser = Browser(executable)
    try:
        tab = Page(browser, width, height)
        tab.open(page)
        yield tab
    finally:
        browser.close()
