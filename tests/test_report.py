"""kcheck report: the page is built from the engines' results (verdicts, record, counterexamples,
lassos, proofs, saved traces), needs nothing from the network, and shows in a real browser."""
import copy
import dataclasses
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kcheck.loader import load_spec
from kcheck.report import collect, render_html, sequence_svg

ROOT = Path(__file__).resolve().parent.parent
# not `python -m kcheck.cli`: run as __main__, the CLI module is loaded twice and a command
# module's BadInput (imported from kcheck.cli) is not the class main() catches
KCHECK = [sys.executable, "-c", "from kcheck.cli import run; run()"]
RING = str(ROOT / "tests" / "specs" / "ring.py")


def kcheck(*args, cwd=ROOT):
    return subprocess.run(KCHECK + list(args), capture_output=True, text=True, cwd=cwd, timeout=600)


class _Cells(HTMLParser):
    """The matrix cells (variant, property) -> data-status, and every URL the page refers to."""

    def __init__(self):
        super().__init__()
        self.cells, self.urls, self.scripts = {}, [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "td" and "data-status" in a and "data-variant" in a:
            self.cells[(a["data-variant"], a["data-property"])] = (a["data-status"], a["data-matches-record"])
        if tag == "script":
            self.scripts += 1
        for k in ("src", "href"):
            if a.get(k):
                self.urls.append(a[k])


def _parse(page: str) -> _Cells:
    p = _Cells()
    p.feed(page)
    return p


@pytest.fixture(scope="module")
def two_phase_page():
    rep = collect(load_spec("two_phase"), saved_dir=ROOT / "counterexamples")
    return rep, render_html(rep)


def test_matrix_shows_each_variants_verdicts_as_the_search_found_them(two_phase_page):
    rep, page = two_phase_page
    cells = _parse(page).cells
    assert cells[("lamport", "consistent")] == ("holds", "true")
    assert cells[("commit-without-prepares", "consistent")] == ("violated", "true")
    assert cells[("lamport", "decides")] == ("holds", "true")          # progress, from the graph
    assert cells[("commit-without-prepares", "lemmas")] == ("violated", "true")
    assert "Every verdict matches the spec's record." in page
    # the figures are the search's own
    lamport = next(r for r in rep.runs if r.variant == "lamport")
    assert lamport.search.distinct_states == 288
    assert "288 distinct states" in page


def test_counterexample_has_its_steps_changed_fields_and_diagram(two_phase_page):
    _, page = two_phase_page
    sec = re.search(r'<section class="counterexample" id="cx-commit-without-prepares-consistent".*?</section>',
                    page, re.S).group(0)
    assert "violated in 3 steps" in sec
    steps = re.findall(r'<tr class="step[^"]*" data-step="(\d+)">', sec)
    assert steps == ["0", "1", "2", "3"]
    assert "<b>tm_state</b>: init → committed" in sec
    assert "<b>rm_state[0]</b>: working → aborted" in sec
    svg = re.search(r"<svg.*?</svg>", sec, re.S).group(0)
    assert svg.count('class="message"') + svg.count('class="note"') == 3
    for actor in ("TM", "RMs", "RM1", "RM0"):
        assert f">{actor}</text>" in svg


def test_the_page_is_self_contained(two_phase_page):
    _, page = two_phase_page
    p = _parse(page)
    assert p.scripts == 0
    assert all(u.startswith("#") for u in p.urls), p.urls
    assert "@import" not in page and "url(http" not in page


def test_saved_counterexamples_are_replayed(two_phase_page):
    rep, page = two_phase_page
    saved = {(s.variant, s.property): s for s in rep.saved}
    s = saved[("commit-without-prepares", "consistent")]
    assert s.reproduces and s.steps == 3
    assert "reproduces: consistent violated after 3 steps" in page


def test_a_verdict_that_differs_from_the_record_is_marked(tmp_path):
    spec = copy.copy(load_spec("two_phase"))
    # blank the record of `consistent` in the broken variant, as if the bug were new
    spec.variants = {k: dataclasses.replace(v, expected_violations=v.expected_violations - {"consistent"})
                     for k, v in spec.variants.items()}
    rep = collect(spec, progress=False, saved_dir=None)
    page = render_html(rep)
    assert _parse(page).cells[("commit-without-prepares", "consistent")] == ("violated", "false")
    assert "≠ record" in page and "not in the record" in page
    assert "consistent is violated but the record says it holds" in page


def test_a_lasso_has_its_loop_marked():
    rep = collect(load_spec(RING), saved_dir=None)
    page = render_html(rep)
    assert _parse(page).cells[("ring", "reaches-three")][0] == "violated"
    sec = re.search(r'id="cx-ring-reaches-three".*?</section>', page, re.S).group(0)
    assert "(lasso)" in sec
    assert len(re.findall(r'<tr class="step loop"', sec)) == 3
    assert "Steps 1..3 repeat for ever" in sec
    assert 'class="loop"' in sequence_svg(rep.runs[0].progress_traces["reaches-three"])


@pytest.mark.z3
def test_proofs_are_shown_with_their_lemmas():
    spec = load_spec("two_phase")
    rep = collect(spec, progress=False, prove=True, saved_dir=None)
    lamport = next(r for r in rep.runs if r.variant == "lamport")
    proof = next(p for p in lamport.proofs if p.property == "consistent")
    assert proof.verdict == "proved"
    page = render_html(rep)
    row = re.search(r'<tr data-variant="lamport" data-property="consistent">.*?</tr>', page, re.S).group(0)
    assert "PROVED" in row and proof.lemmas_used and proof.lemmas_used[0] in row


def test_command_writes_one_page_and_exits_by_the_record(tmp_path):
    r = kcheck("report", "two_phase", "-o", str(tmp_path / "out"), "--no-progress")
    assert r.returncode == 0, r.stderr
    page = tmp_path / "out" / "two_phase.html"
    assert page.is_file() and "matches the record" in r.stdout
    assert _parse(page.read_text()).cells[("commit-without-prepares", "consistent")][0] == "violated"


def test_bad_output_directory_is_one_line_and_exit_2(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = kcheck("report", "two_phase", "-o", str(f))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "not a directory" in r.stderr
    r = kcheck("report", "no_such_spec", "-o", str(tmp_path))
    assert r.returncode == 2 and "unknown spec 'no_such_spec'" in r.stderr


def test_conformance_results_are_shown(tmp_path):
    # the shape `kcheck conform SPEC --json` prints (checker/conform/driver.to_json)
    conf = {"kafka": "4.3.1", "traces": [
        {"trace": "tests/scenarios/x.json", "variant": "lamport", "steps": 3, "outcome": "conforms",
         "step": None, "detail": "", "matches": ["lamport"], "seconds": 1.0, "wire_log": None},
        {"trace": "counterexamples/y.json", "variant": "lamport", "steps": 4, "outcome": "diverges",
         "step": 2, "detail": "spec said NONE, Kafka said FENCED_MEMBER_EPOCH", "matches": [],
         "seconds": 1.0, "wire_log": None}]}
    f = tmp_path / "conform.json"
    f.write_text(json.dumps(conf))
    r = kcheck("report", "two_phase", "-o", str(tmp_path / "out"), "--no-progress", "--conformance", str(f))
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "out" / "two_phase.html").read_text()
    table = re.search(r'<table id="conformance">.*?</table>', page, re.S).group(0)
    assert table.count("<tr>") == 3 and "spec said NONE, Kafka said FENCED_MEMBER_EPOCH" in table
    assert "Kafka 4.3.1: 2 trace(s) replayed" in page
    f.write_text("[1, 2]")
    r = kcheck("report", "two_phase", "-o", str(tmp_path / "out"), "--conformance", str(f))
    assert r.returncode == 2 and "kcheck conform SPEC --json" in r.stderr


@pytest.mark.browser
def test_report_in_headless_chromium(tmp_path):
    from browser_support import foreign_requests, page
    r = kcheck("report", "two_phase", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    url = (tmp_path / "two_phase.html").as_uri()
    with page() as pg:
        pg.goto(url)
        assert pg.title() == "kcheck report: two_phase"
        cell = pg.locator('#matrix td[data-variant="commit-without-prepares"][data-property="consistent"]')
        assert cell.inner_text().startswith("VIOLATED (3 steps)")
        assert pg.locator('#matrix td[data-variant="lamport"][data-property="consistent"]').inner_text() == "holds"
        cell.locator("a").click()
        sec = pg.locator("#cx-commit-without-prepares-consistent")
        assert sec.locator("tr.step").count() == 4
        svg = sec.locator("svg.sequence")
        box = svg.bounding_box()
        assert box and box["width"] > 300 and box["height"] > 100   # drawn, not an empty box
        assert svg.locator("line.message").count() == 2 and svg.locator("rect.note").count() == 1
        assert pg.kcheck_errors == []
        assert foreign_requests(pg.kcheck_requests) == []
        assert pg.kcheck_requests == [url]


@pytest.fixture(scope="module")
def kafka_sized_page(tmp_path_factory):
    """consumer_group's page: its 15 variants, 13 properties and 18 lemmas, as wide as a report
    gets. Each search stops at 3,000 states (the layout depends on the columns and the traces'
    shapes, not on how far the search went), so the page takes seconds, not the 20 minutes of
    the whole report."""
    rep = collect(load_spec("consumer_group"), progress=False, max_states=3000, saved_dir=None)
    path = tmp_path_factory.mktemp("kafka") / "consumer_group.html"
    path.write_text(render_html(rep))
    return rep, path


@pytest.mark.browser
def test_a_kafka_sized_report_is_no_wider_than_a_1280_px_window(kafka_sized_page):
    """The matrix overflowed 1400 px and its lemmas column was one letter a line (issue 37)."""
    from browser_support import VIEWPORT, overflow, page, screenshot
    rep, path = kafka_sized_page
    with page(VIEWPORT) as pg:
        pg.goto(path.as_uri())
        screenshot(pg, "report-consumer_group")
        assert overflow(pg) is None
        # the matrix scrolls in its own box, with its header row in view
        box = pg.locator(".matrix-box")
        assert box.evaluate("b => b.scrollWidth <= b.clientWidth || getComputedStyle(b).overflowX == 'auto'")
        assert pg.locator("#matrix thead th").first.evaluate("th => getComputedStyle(th).position") == "sticky"
        # every lemma in a row of its own, its name on one line
        lemmas = [p for p in rep.spec.properties.values() if p.lemma]
        rows = pg.locator("table.lemmas tbody tr")
        assert rows.count() == len(lemmas) == 18
        name = rows.first.locator("td").first
        assert name.bounding_box()["height"] < 30, "a lemma's name wraps"
        pg.locator("#verdicts").scroll_into_view_if_needed()
        assert pg.kcheck_errors == []


@pytest.mark.browser
def test_no_sequence_diagram_label_crosses_a_lifeline(kafka_sized_page):
    """Each step's label, as the browser draws it, lies between lifelines: measured boxes, not
    the layout's own arithmetic (labels sized at 6.6 px a character crossed them)."""
    from browser_support import VIEWPORT, page, screenshot
    _, path = kafka_sized_page
    with page(VIEWPORT) as pg:
        pg.goto(path.as_uri())
        crossings = pg.evaluate("""() => {
            const out = [];
            let labels = 0;
            for (const svg of document.querySelectorAll('svg.sequence')) {
                const lines = [...svg.querySelectorAll('line.lifeline')]
                    .map(l => l.getBoundingClientRect().left);
                for (const t of svg.querySelectorAll('text.step')) {
                    labels += 1;
                    const r = t.getBoundingClientRect();
                    for (const x of lines)
                        if (r.left < x && x < r.right)
                            out.push(t.textContent + ' crosses the lifeline at ' + Math.round(x));
                }
            }
            return {labels, out};
        }""")
        assert crossings["labels"] > 50, crossings
        assert crossings["out"] == []
        diagram = pg.locator("svg.sequence").nth(3)
        diagram.scroll_into_view_if_needed()
        screenshot(pg, "report-consumer_group-diagram")


def test_a_signal_during_a_search_writes_the_variants_finished_and_exits_143(tmp_path, monkeypatch, capsys):
    """SIGTERM while the second variant is searched (the search stops as 'terminated', as
    bfs.search does on the signal): the page shows the variant finished and the one stopped,
    no further variant is run, and the exit is 143, not a report that "matches the record"."""
    from kcheck import bfs
    from kcheck.cli import main
    real, calls = bfs.search, []

    def terminated_at_the_second(*a, **k):
        res = real(*a, **k)
        calls.append(res)
        if len(calls) == 2:
            res.stop_reason, res.exhaustive = "terminated", False
        return res
    monkeypatch.setattr(bfs, "search", terminated_at_the_second)
    code = main(["report", "two_phase", "-o", str(tmp_path), "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 143 and len(calls) == 2, err
    assert (tmp_path / "two_phase.html").exists()
    assert "kcheck: report terminated (SIGTERM); 1 of 1 page(s) written" in err


def test_a_signal_inside_a_state_graph_writes_no_page_and_exits_130(tmp_path, monkeypatch, capsys):
    from kcheck import run
    from kcheck.cli import main

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(run, "progress_of", interrupted)
    code = main(["report", "two_phase", "-o", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 130 and not (tmp_path / "two_phase.html").exists()
    assert "kcheck: report interrupted; 0 of 1 page(s) written" in err
