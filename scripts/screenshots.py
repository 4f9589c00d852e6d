"""Regenerates the README's screenshots, docs/img/report.png and docs/img/explorer.png, with
Debian's headless chromium (scripts/setup.sh --test installs it) driven by Playwright.

    .venv/bin/python scripts/screenshots.py

The report is two_phase's (`kcheck report two_phase`); the explorer walks two_phase's saved
counterexample for `consistent` two steps in."""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "img"
KCHECK = [sys.executable, "-c", "from kcheck.cli import run; run()"]
TRACE = "counterexamples/two_phase/commit-without-prepares/consistent.json"


def main() -> int:
    exe = shutil.which("chromium")
    if not exe:
        print("screenshots: Debian's chromium is not installed (scripts/setup.sh --test)", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        subprocess.run(KCHECK + ["report", "two_phase", "-o", tmp], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        pg = browser.new_page(viewport={"width": 1200, "height": 1250})
        pg.goto((Path(tmp) / "two_phase.html").as_uri())
        pg.screenshot(path=str(OUT / "report.png"))
        proc = subprocess.Popen(KCHECK + ["explore", "two_phase", TRACE, "--port", "0"], cwd=ROOT,
                                stdout=subprocess.PIPE, text=True)
        try:
            url = proc.stdout.readline().split(" at ")[1].split()[0]
            pg = browser.new_page(viewport={"width": 1200, "height": 1000})
            pg.goto(url)
            pg.wait_for_selector("#state tbody tr")
            for n in (1, 2):
                pg.click("#next")
                pg.wait_for_function(f"document.querySelectorAll('#path li').length == {n}")
            pg.screenshot(path=str(OUT / "explorer.png"))
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        browser.close()
    print(f"wrote {OUT / 'report.png'} and {OUT / 'explorer.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
