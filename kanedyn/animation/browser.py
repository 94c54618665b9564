"""Headless Chromium for animation pages: screenshots and the page's DOM after load.

No DevTools protocol: Chromium's own ``--screenshot`` and ``--dump-dom`` switches, with
a virtual-time budget so that the page's scripts have run. WebGL runs on SwiftShader
(software), so no GPU is needed. Chromium comes from the system (Debian's ``chromium``
package); :func:`find_browser` returns ``None`` when there is none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from kanedyn.errors import KanedynError

__all__ = ["dump_dom", "find_browser", "screenshot"]

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_browser() -> str | None:
    """The Chromium executable (``$KANEDYN_CHROMIUM`` first, then the PATH), or None."""
    env = os.environ.get("KANEDYN_CHROMIUM")
    if env:
        return env if Path(env).is_file() else shutil.which(env)
    return next((p for p in map(shutil.which, NAMES) if p), None)


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    browser = find_browser()
    if browser is None:
        raise KanedynError(
            "no Chromium found: install it (Debian: apt-get install chromium) "
            "or set KANEDYN_CHROMIUM to its path"
        )
    with tempfile.TemporaryDirectory(prefix="kanedyn-chromium-") as profile:
        cmd = [
            browser,
            "--headless=new",
            "--no-sandbox",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--use-angle=swiftshader",
            "--enable-unsafe-swiftshader",
            "--ignore-gpu-blocklist",
            "--hide-scrollbars",
            "--mute-audio",
            f"--user-data-dir={profile}",
            *args,
        ]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise KanedynError(f"Chromium did not finish within {timeout:g} s") from None


def _url(page: str | Path, t: float | None) -> str:
    url = Path(page).resolve().as_uri()
    return url if t is None else f"{url}#t={t!r}"


def screenshot(
    page: str | Path,
    png: str | Path,
    *,
    t: float | None = None,
    size: tuple[int, int] = (960, 640),
    wait_ms: int = 3000,
    timeout: float = 120.0,
) -> Path:
    """Render ``page`` (opened at ``#t=t`` when given) to the PNG file ``png``."""
    png = Path(png).resolve()
    png.unlink(missing_ok=True)
    res = _run(
        [
            f"--screenshot={png}",
            f"--window-size={size[0]},{size[1]}",
            f"--virtual-time-budget={wait_ms}",
            _url(page, t),
        ],
        timeout,
    )
    if not png.is_file():
        raise KanedynError(
            f"Chromium wrote no screenshot (exit {res.returncode}): {res.stderr[-2000:]}"
        )
    return png


def dump_dom(
    page: str | Path, *, t: float | None = None, wait_ms: int = 3000, timeout: float = 120.0
) -> str:
    """The page's DOM after its scripts ran (``--dump-dom``), as HTML text."""
    res = _run([f"--virtual-time-budget={wait_ms}", "--dump-dom", _url(page, t)], timeout)
    if res.returncode != 0 or not res.stdout:
        raise KanedynError(
            f"Chromium --dump-dom failed (exit {res.returncode}): {res.stderr[-2000:]}"
        )
    return res.stdout
