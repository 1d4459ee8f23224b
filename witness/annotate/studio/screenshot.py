"""Screenshot a Label Studio task as an annotator sees it, with headless Chromium.

Logs in through Label Studio's own login form (so the password really works), hands the session
cookie to a headless Chromium through the DevTools protocol, opens the task in the labelling
interface, waits until the image canvas has rendered, and writes a PNG. Used by the screenshot test
and for ``docs/img/``.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ...errors import InputError, MissingDependencyError, ServiceError, require

__all__ = ["find_chromium", "login_cookies", "screenshot_task"]


def find_chromium(candidates: tuple[str, ...] = ("chromium", "chromium-browser", "google-chrome", "chrome")) -> str:
    """The path of a Chromium executable, or :class:`MissingDependencyError` saying how to get one.

    >>> isinstance(find_chromium.__doc__, str)
    True
    """
    for c in candidates:
        p = shutil.which(c)
        if p:
            return p
    raise MissingDependencyError(
        "Expected a Chromium executable (chromium), got none on PATH. Install it with "
        "`apt-get install -y chromium` (the Makefile's studio target does)."
    )


def login_cookies(url: str, email: str, password: str) -> dict[str, str]:
    """Log in through ``/user/login/``; return the session cookies. Raises when the login fails."""
    httpx = require("httpx", "annotate")
    base = url.rstrip("/")
    with httpx.Client(base_url=base, follow_redirects=False, timeout=60) as http:
        try:
            http.get("/user/login/")
        except httpx.ConnectError:
            raise ServiceError(f"Expected Label Studio at {base}, got no answer. Start it with `witness studio serve`.") from None
        csrf = http.cookies.get("csrftoken", "")
        resp = http.post("/user/login/", data={"email": email, "password": password, "csrfmiddlewaretoken": csrf},
                         headers={"Referer": base + "/user/login/", "X-CSRFToken": csrf})
        if resp.status_code not in (301, 302) or "sessionid" not in http.cookies:
            raise ServiceError(
                f"Expected the login of {email} to succeed, got HTTP {resp.status_code} without a session. "
                "Check the password (`witness studio users add EMAIL --password ...` resets it)."
            )
        return {k: v for k, v in http.cookies.items()}


class _CDP:
    def __init__(self, ws_url: str):
        ws = require("websockets", "annotate")
        from websockets.sync.client import connect

        del ws
        self._cm = connect(ws_url, max_size=64 * 2**20, open_timeout=30)
        self._ws = self._cm.__enter__()
        self._ids = itertools.count(1)

    def call(self, method: str, timeout: float = 60.0, **params) -> dict:
        mid = next(self._ids)
        self._ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        t0 = time.monotonic()
        while True:
            msg = json.loads(self._ws.recv(timeout=max(0.1, timeout - (time.monotonic() - t0))))
            if msg.get("id") == mid:
                if "error" in msg:
                    raise ServiceError(f"Expected Chromium to run {method}, got {msg['error']}. Check the Chromium version.")
                return msg.get("result", {})

    def close(self) -> None:
        self._cm.__exit__(None, None, None)


def _devtools_ws(port: int, timeout: float = 30.0) -> str:
    import urllib.request

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                pages = [p for p in json.loads(r.read()) if p.get("type") == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
        except OSError:
            pass
        time.sleep(0.2)
    raise ServiceError(f"Expected Chromium's DevTools on port {port} within {timeout:.0f} s, got nothing. Check the Chromium install.")


def screenshot_task(
    url: str,
    project_id: int,
    task_id: int,
    out: str | os.PathLike,
    *,
    email: str,
    password: str,
    width: int = 1400,
    height: int = 1000,
    timeout: float = 90.0,
    settle_s: float = 3.0,
    chromium: str | None = None,
    select: tuple[float, float] | None = None,
) -> Path:
    """Write a PNG of task ``task_id`` of project ``project_id`` in the labelling interface.

    Waits until the page shows the image canvas (Konva) and then ``settle_s`` seconds for the
    pre-annotations to draw. ``select`` = ``(fx, fy)``, fractions of the image's width and height,
    clicks there first (selecting the box under it, which shows its per-box choices). Returns ``out``.
    """
    from .server import free_port

    exe = chromium or find_chromium()
    cookies = login_cookies(url, email, password)
    port = free_port()
    profile = tempfile.mkdtemp(prefix="witness-chromium-")
    proc = subprocess.Popen(
        [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--hide-scrollbars", f"--remote-debugging-port={port}", "--remote-allow-origins=*",
         f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        cdp = _CDP(_devtools_ws(port))
        try:
            cdp.call("Network.enable")
            for name, value in cookies.items():
                cdp.call("Network.setCookie", name=name, value=value, url=url.rstrip("/") + "/")
            cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
            cdp.call("Page.enable")
            target = f"{url.rstrip('/')}/projects/{project_id}/data?task={task_id}"
            cdp.call("Page.navigate", url=target)
            t0 = time.monotonic()
            probe = "document.querySelectorAll('canvas').length"
            while True:
                n = cdp.call("Runtime.evaluate", expression=probe, returnByValue=True)["result"].get("value", 0)
                if n and n > 0:
                    break
                if time.monotonic() - t0 > timeout:
                    raise ServiceError(f"Expected the labelling interface of task {task_id} to render within {timeout:.0f} s, "
                                       f"got no image canvas ({target}). Open it in a browser to see why.")
                time.sleep(0.5)
            time.sleep(settle_s)
            if select is not None:
                rect = cdp.call("Runtime.evaluate", returnByValue=True, expression=(
                    "(() => { const c = [...document.querySelectorAll('canvas')].sort((a, b) => "
                    "b.width * b.height - a.width * a.height)[0].getBoundingClientRect(); "
                    "return [c.left, c.top, c.width, c.height]; })()"))["result"]["value"]
                x, y = rect[0] + select[0] * rect[2], rect[1] + select[1] * rect[3]
                for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
                    cdp.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)
                time.sleep(1.0)
            shot = cdp.call("Page.captureScreenshot", format="png")
        finally:
            cdp.close()
    finally:
        try:
            os.killpg(proc.pid, 15)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
        shutil.rmtree(profile, ignore_errors=True)
    out = Path(out)
    if out.suffix.lower() != ".png":
        raise InputError(f"Expected a .png output path, got {out}. Name the file *.png.")
    out.parent.mkdir(parents=True, exist_ok=True)
    from ...io import atomic_path

    with atomic_path(out, suffix=".png") as tmp:
        tmp.write_bytes(base64.b64decode(shot["data"]))
        tmp.chmod(0o644)  # mkstemp makes 0600; a picture is for everyone
    return out
