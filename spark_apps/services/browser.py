"""A real headless Chromium, driven over the DevTools protocol: load a page the platform wrote, ask it what it drew,
collect what it logged, and take a screenshot of the whole page.

The browser is Debian's ``chromium`` (``make test`` installs it when missing); it listens for DevTools on a port of
127.0.0.1 that it picks itself, and runs with a profile folder of its own, deleted with it.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_apps.core.errors import PlatformError

START_TIMEOUT_S = 60.0
LOAD_TIMEOUT_S = 60.0


@dataclass
class PageView:
    """What a page showed in the browser: the value of the probe script, and every error it logged."""

    probe: Any
    errors: list[str] = field(default_factory=list)
    screenshot: Path | None = None


def view(page: Path, probe: str, binary: str = "chromium", screenshot: Path | None = None,
         width: int = 1280) -> PageView:
    """Load ``page`` in a headless Chromium, evaluate the JavaScript expression ``probe`` once it has loaded, and
    write a PNG of the whole page to ``screenshot`` when given."""
    found = shutil.which(binary)
    if found is None:
        raise PlatformError(f"no {binary} browser on PATH: install Debian's chromium (apt-get install chromium), "
                            "or name another with KAPPA_BROWSER")
    with tempfile.TemporaryDirectory(prefix="kappa-browser-", ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen(
            [found, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", f"--user-data-dir={profile}",
             f"--window-size={width},900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            from websockets.sync.client import connect

            with connect(_endpoint(Path(profile), process), max_size=None, open_timeout=START_TIMEOUT_S) as socket:
                return _DevTools(socket).view(page.resolve(), probe, screenshot, width)
        finally:
            os.killpg(process.pid, signal.SIGKILL)  # the browser and its renderer processes
            process.wait()


def _endpoint(profile: Path, process: subprocess.Popen) -> str:
    """The browser's DevTools WebSocket address, which Chromium writes to its profile once it listens."""
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise PlatformError(f"the headless browser exited with code {process.returncode} before it listened")
        lines = port_file.read_text().split() if port_file.exists() else []
        if len(lines) == 2:
            return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        time.sleep(0.05)
    raise PlatformError(f"the headless browser did not listen within {START_TIMEOUT_S:.0f}s")


class _DevTools:
    """One DevTools connection: commands to one page (a flat session), events gathered while waiting."""

    def __init__(self, socket) -> None:
        self.socket = socket
        self.ids = itertools.count(1)
        self.session: str | None = None
        self.errors: list[str] = []
        self.loaded = False

    def view(self, page: Path, probe: str, screenshot: Path | None, width: int) -> PageView:
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Page.navigate", url=page.as_uri())
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while not self.loaded:
            if time.monotonic() > deadline:
                raise PlatformError(f"{page} did not load within {LOAD_TIMEOUT_S:.0f}s")
            self._receive(deadline)
        found = self.call("Runtime.evaluate", expression=probe, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in found:
            self.errors.append(f"the probe failed: {found['exceptionDetails'].get('text')}")
        result = PageView(found.get("result", {}).get("value"), self.errors)
        if screenshot is not None:
            height = int(self.call("Page.getLayoutMetrics")["cssContentSize"]["height"])
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                      mobile=False)
            shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            result.screenshot = screenshot
        return result

    def call(self, method: str, **params) -> dict:
        """Send one command and wait for its answer, keeping the events that arrive meanwhile."""
        number = next(self.ids)
        message = {"id": number, "method": method, "params": params}
        if self.session is not None and not method.startswith("Target."):
            message["sessionId"] = self.session
        self.socket.send(json.dumps(message))
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while True:
            answer = self._receive(deadline)
            if answer.get("id") == number:
                if "error" in answer:
                    raise PlatformError(f"the browser refused {method}: {answer['error'].get('message')}")
                return answer.get("result", {})

    def _receive(self, deadline: float) -> dict:
        try:
            message = json.loads(self.socket.recv(timeout=max(0.1, deadline - time.monotonic())))
        except TimeoutError:
            raise PlatformError("the headless browser stopped answering") from None
        method, params = message.get("method"), message.get("params", {})
        if method == "Page.loadEventFired":
            self.loaded = True
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append(f"exception: {details.get('exception', {}).get('description') or details.get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description", "")))
                                                      for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())
        return message
