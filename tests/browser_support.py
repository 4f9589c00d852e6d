"""Headless Debian chromium driven by Playwright, for the report and explorer tests.

Playwright's own browser download cannot work here (no network but the package registries), so
the tests launch the chromium that scripts/setup.sh --test installs from Debian. A missing
browser or driver fails the test with the reason; it is never skipped."""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pytest


def chromium_path() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("Debian's chromium is not installed (scripts/setup.sh --test installs it: "
                "apt-get install -y chromium)")


@contextmanager
def page(viewport=(1280, 900)):
    """A fresh page that records console errors, page errors and every request's URL."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright for Python is not installed (pip install -e '.[test]')")
    exe = chromium_path()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        try:
            pg = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            pg.kcheck_errors = []
            pg.kcheck_requests = []
            pg.on("console", lambda m: pg.kcheck_errors.append(f"console {m.type}: {m.text}")
                  if m.type in ("error", "warning") else None)
            pg.on("pageerror", lambda e: pg.kcheck_errors.append(f"page error: {e}"))
            pg.on("request", lambda r: pg.kcheck_requests.append(r.url))
            yield pg
        finally:
            browser.close()


def foreign_requests(urls: list[str]) -> list[str]:
    """Requests that left the machine: anything but file:, data:, about: and 127.0.0.1."""
    out = []
    for u in urls:
        p = urlparse(u)
        if p.scheme in ("file", "data", "about"):
            continue
        if p.scheme in ("http", "https", "ws") and p.hostname == "127.0.0.1":
            continue
        out.append(u)
    return out


# The tests' output folder: a screenshot of every page a browser test checks, at the viewport a
# newcomer's laptop has, for a person to look at after the run (kept out of git by .gitignore).
OUTPUT = Path(os.environ.get("KCHECK_TEST_OUTPUT", Path(__file__).resolve().parent / "output"))
VIEWPORT = (1280, 800)


def screenshot(pg, name: str) -> Path:
    """The page as the viewport shows it (not the full page), saved as OUTPUT/<name>.png."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    path = OUTPUT / f"{name}.png"
    pg.screenshot(path=str(path))
    return path


def overflow(pg) -> dict | None:
    """How the page overflows its viewport sideways: the page's scroll width and the widest
    element that sticks out (tag, id or class, right edge), or None when it fits."""
    return pg.evaluate("""() => {
        const vw = document.documentElement.clientWidth;
        const sw = document.documentElement.scrollWidth;
        if (sw <= vw) return null;
        let worst = null;
        for (const el of document.body.querySelectorAll('*')) {
            const r = el.getBoundingClientRect();
            if (r.right > vw + 1 && (!worst || r.right > worst.right))
                worst = {tag: el.tagName, id: el.id, cls: String(el.className), right: r.right};
        }
        return {viewport: vw, scroll_width: sw, widest: worst};
    }""")
