"""Regenerates the README's screenshots in docs/img, at Kafka's size and a laptop's window
(1280x800), with Debian's headless chromium (scripts/setup.sh --test installs it) driven by
Playwright:

- report.png: `kcheck report consumer_group --no-progress`, its verdict matrix (15 variants, 13
  properties; the lemmas below in their own table);
- report-diagram.png: the same page at the sequence diagram of kip1251's 11-step
  no-zombie-commit counterexample;
- explorer.png: `kcheck explore consumer_group` walking that saved counterexample to its last
  step, the violated property at the top beside the state.

    .venv/bin/python scripts/screenshots.py
"""
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
TRACE = "counterexamples/consumer_group/kip1251/no-zombie-commit.json"
VIEWPORT = {"width": 1280, "height": 800}


def main() -> int:
    exe = shutil.which("chromium")
    if not exe:
        print("screenshots: Debian's chromium is not installed (scripts/setup.sh --test)", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        # the safety verdicts only: the state graphs would add many minutes and no column the
        # picture needs (the record still decides the exit code)
        subprocess.run(KCHECK + ["report", "consumer_group", "--no-progress", "-o", tmp], cwd=ROOT,
                       check=True, stdout=subprocess.DEVNULL)
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        pg = browser.new_page(viewport=VIEWPORT)
        pg.goto((Path(tmp) / "consumer_group.html").as_uri())
        pg.evaluate("document.getElementById('verdicts').scrollIntoView()")
        pg.screenshot(path=str(OUT / "report.png"))
        pg.locator("#cx-kip1251-no-zombie-commit .diagram").evaluate("d => d.scrollIntoView()")
        pg.screenshot(path=str(OUT / "report-diagram.png"))
        proc = subprocess.Popen(KCHECK + ["explore", "consumer_group", TRACE, "--port", "0"], cwd=ROOT,
                                stdout=subprocess.PIPE, text=True)
        try:
            url = proc.stdout.readline().split(" at ")[1].split()[0]
            pg = browser.new_page(viewport=VIEWPORT)
            pg.goto(url)
            pg.wait_for_selector("#state tbody tr")
            for n in range(1, 12):
                pg.click("#next")
                pg.wait_for_function(f"document.querySelectorAll('#path li').length == {n}")
            pg.screenshot(path=str(OUT / "explorer.png"))
        finally:
            # SIGTERM, not Ctrl-C's SIGINT: a script started in the background by a
            # non-interactive shell hands its children SIGINT ignored
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        browser.close()
    print(f"wrote {OUT / 'report.png'}, {OUT / 'report-diagram.png'} and {OUT / 'explorer.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
