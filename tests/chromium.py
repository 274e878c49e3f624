"""Headless Chromium for tests, driven over the DevTools protocol on a pipe (standard
library only): open a page, evaluate script, move the mouse, take screenshots.

``--remote-debugging-pipe`` makes Chromium read commands from fd 3 and write replies and
events to fd 4, each a JSON message ended by a NUL byte.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

__all__ = ["Browser", "find_chromium", "png_pixels"]

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The path of a Chromium (or Chrome) executable, or ``None``."""
    for name in _NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium process with one page (tab)."""

    def __init__(self, executable: str, width: int = 1280, height: int = 900) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-profile-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def child_fds() -> None:  # runs in the child before exec: commands on 3, replies on 4
            # Move both ends out of the way first: either may itself be fd 3 or 4.
            commands = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            replies = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(commands, 3)  # dup2 makes the copies inheritable
            os.dup2(replies, 4)

        self.process = subprocess.Popen(
            [
                executable,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--no-first-run",
                "--hide-scrollbars",
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile.name}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=child_fds,
            close_fds=False,  # keeps fds 3 and 4; every other fd of ours is close-on-exec
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.width, self.height = width, height
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = attached["sessionId"]
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )
        self.send("Page.enable", session=True)

    def send(self, method: str, params: dict[str, Any] | None = None, session: bool = False) -> Any:
        """Send one command and wait for its reply (events in between are dropped)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        result: dict[str, Any] = json.loads(message)
        return result

    def open(self, path: Path) -> float:
        """Navigate to a local file; returns the seconds until the load event."""
        start = time.perf_counter()
        self.send("Page.navigate", {"url": path.resolve().as_uri()}, session=True)
        self.wait_for("document.readyState === 'complete'")
        return time.perf_counter() - start

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serializable)."""
        reply = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=True,
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"script failed: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_for(self, condition: str, timeout: float = 60.0) -> float:
        """Poll a JavaScript condition until it is true; returns the seconds waited."""
        start = time.perf_counter()
        while not self.evaluate(f"Boolean({condition})"):
            if time.perf_counter() - start > timeout:
                raise TimeoutError(f"the page never satisfied {condition!r}")
            time.sleep(0.02)
        return time.perf_counter() - start

    def hover(self, x: float, y: float) -> None:
        """Move the mouse to viewport coordinates (as a person pointing at something)."""
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y}, session=True)

    def screenshot(self, clip: dict[str, float] | None = None) -> bytes:
        """A PNG of the viewport, or of ``clip`` (``x, y, width, height`` in CSS pixels)."""
        params: dict[str, Any] = {"format": "png"}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", params, session=True)["data"])

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._profile.cleanup()


def png_pixels(data: bytes) -> list[list[tuple[int, int, int]]]:
    """The RGB pixels of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes),
    row by row. Small images only: the filters are undone in pure Python."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos = 8
    idat = b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG (depth {depth}, colour type {color})")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[list[tuple[int, int, int]]] = []
    previous = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                guess = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + guess) & 0xFF
        rows.append([tuple(line[x * channels : x * channels + 3]) for x in range(width)])  # type: ignore[misc]
        previous = line
    return rows
