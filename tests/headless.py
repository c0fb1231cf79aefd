"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`):
one browser for a whole walk of the web view, pages opened at an exact viewport, scripts run in
them (the visible text, the page's width) and screenshots taken. No websocket library and no
port: the protocol's JSON messages go over file descriptors 3 (to the browser) and 4 (from it),
each ended by a NUL byte.

Used by tests/test_browser_walk.py and docs/screenshots/make.py (which regenerates the
committed screenshots).
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(RuntimeError):
    pass


class Browser:
    """    with Browser(profile_dir) as browser:
               browser.open(url, width=390)
               browser.evaluate("document.title")
               browser.screenshot()   # PNG bytes of the viewport"""

    def __init__(self, profile_dir, *, timeout_s: float = 30.0):
        if CHROMIUM is None:
            raise BrowserError("no chromium on PATH")
        self.timeout_s = timeout_s
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def child_fds():   # the browser reads commands on fd 3 and answers on fd 4
            high_r, high_w = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)
        self.process = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
             "--hide-scrollbars", "--remote-debugging-pipe", f"--user-data-dir={profile_dir}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=child_fds, pass_fds=(3, 4))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=True)
        self.send("Runtime.enable", session=True)
        self.console_errors: list[str] = []

    # ---- the protocol ------------------------------------------------------------------------
    def send(self, method: str, params: dict | None = None, *, session: bool = False) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def _read(self) -> dict:
        deadline = time.monotonic() + self.timeout_s
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise BrowserError("the browser did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("the browser closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _wait_event(self, method: str) -> dict:
        while True:
            for index, event in enumerate(self._events):
                if event.get("method") == method:
                    return self._events.pop(index)
            self._events.append(self._read())

    # ---- pages -------------------------------------------------------------------------------
    def open(self, url: str, *, width: int = 1400, height: int = 1000) -> None:
        """Load `url` at a viewport `width` px wide (a phone's when narrow: its meta viewport is
        honoured) and wait until it and its scripts have loaded."""
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                          "mobile": width < 600}, session=True)
        self._events = [e for e in self._events if e.get("method") != "Page.loadEventFired"]
        answer = self.send("Page.navigate", {"url": url}, session=True)
        if answer.get("errorText"):
            raise BrowserError(f"{url}: {answer['errorText']}")
        self._wait_event("Page.loadEventFired")
        self.console_errors += [str(e["params"].get("args")) for e in self._events
                                if e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") == "error"]
        self._events = [e for e in self._events if e.get("method") != "Runtime.consoleAPICalled"]

    def evaluate(self, expression: str):
        answer = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session=True)
        if "exceptionDetails" in answer:
            raise BrowserError(f"script failed: {answer['exceptionDetails'].get('text')} "
                               f"{answer['exceptionDetails'].get('exception', {}).get('description', '')}")
        return answer["result"].get("value")

    def screenshot(self, *, full_page: bool = False) -> bytes:
        params = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": min(size[1], 4000), "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", params, session=True)["data"])

    def close(self) -> None:
        try:
            os.write(self._to_browser, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
