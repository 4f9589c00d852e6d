"""kcheck explore: the session steps as the spec says (compiled code), shows each guard conjunct's
value, walks a loaded trace, serves only 127.0.0.1, and works in a real browser."""
import json
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kcheck.explorer import Session, expr_text, make_server
from kcheck.loader import load_spec
from kcheck.trace import load

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "counterexamples" / "two_phase" / "commit-without-prepares" / "consistent.json"
KCHECK = [sys.executable, "-c", "from kcheck.cli import run; run()"]


def _state(view) -> dict:
    return {f["field"]: f["value"] for f in view["state"]}


def _action(view, label) -> dict:
    return next(a for a in view["actions"] if a["label"] == label)


def _prop(view, name) -> bool:
    return next(p for p in view["properties"] if p["name"] == name)["holds"]


def test_taking_an_action_changes_the_state_as_the_spec_says():
    s = Session(load_spec("two_phase").instantiate("lamport"))
    v = s.view()
    assert _state(v)["tm_state"] == "init" and _state(v)["msg_abort"] is False
    assert _action(v, "TMAbort")["enabled"] and not _action(v, "TMCommit")["enabled"]
    s.take(_action(v, "TMAbort")["index"])
    v = s.view()
    changed = {f["field"]: (f["before"], f["value"]) for f in v["state"] if f["changed"]}
    assert changed == {"tm_state": ("init", "aborted"), "msg_abort": (False, True)}
    # after the abort the TM can no longer commit, and every RM may receive the Abort
    assert not _action(v, "TMAbort")["enabled"]
    assert all(_action(v, f"RMRcvAbortMsg(rm={i})")["enabled"] for i in range(3))
    assert [p["label"] for p in v["path"]] == ["TMAbort"]
    s.undo()
    assert _state(s.view())["tm_state"] == "init" and s.view()["path"] == []


def test_a_disabled_action_shows_which_guard_conjunct_is_false():
    v = Session(load_spec("two_phase").instantiate("lamport")).view()
    guard = _action(v, "TMRcvPrepared(rm=1)")["guard"]
    assert guard == [{"text": "tm_state == init", "holds": True},
                     {"text": "msg_prepared[1]", "holds": False}]
    commit = _action(v, "TMCommit")["guard"]
    assert commit[0] == {"text": "tm_state == init", "holds": True}
    assert any(not g["holds"] and "tm_prepared[0]" in g["text"] for g in commit)


def test_a_disabled_action_cannot_be_taken():
    s = Session(load_spec("two_phase").instantiate("lamport"))
    with pytest.raises(ValueError, match="TMCommit is not enabled"):
        s.take(_action(s.view(), "TMCommit")["index"])


def test_walking_a_counterexample_reaches_the_violation():
    model = load_spec("two_phase").instantiate("commit-without-prepares")
    s = Session(model, load(TRACE))
    assert s.view()["trace"]["position"] == 0
    for _ in range(3):
        assert _prop(s.view(), "consistent")
        s.next_in_plan()
    v = s.view()
    assert not _prop(v, "consistent")
    assert v["trace"] == {"name": "trace", "steps": ["TMCommit", "RMRcvCommitMsg(rm=1)",
                                                     "RMChooseToAbort(rm=0)"], "position": 3}
    with pytest.raises(ValueError, match="no more steps"):
        s.next_in_plan()


def test_a_trace_of_another_spec_is_refused():
    s = Session(load_spec(str(ROOT / "tests" / "specs" / "ring.py")).instantiate())
    with pytest.raises(ValueError, match="not of ring"):
        s.load(load(TRACE), "consistent.json")


def test_expression_text_names_fields_and_enum_values():
    m = load_spec("two_phase").instantiate("lamport")
    g = next(i for i in m.instances if i.label == "RMRcvCommitMsg(rm=0)").guard
    assert expr_text(g) == "msg_commit"


@pytest.fixture
def server():
    s = Session(load_spec("two_phase").instantiate("lamport"))
    srv = make_server(s, 0)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def test_the_api_takes_steps_and_answers_bad_requests_with_400(server):
    with urllib.request.urlopen(server + "/api/view", timeout=30) as r:
        v = json.loads(r.read())
    v = _post(server + "/api/step", {"instance": _action(v, "TMAbort")["index"]})
    assert _state(v)["tm_state"] == "aborted"
    with pytest.raises(urllib.error.HTTPError) as e:
        _post(server + "/api/step", {"instance": _action(v, "TMCommit")["index"]})
    assert e.value.code == 400 and "not enabled" in json.loads(e.value.read())["error"]
    with urllib.request.urlopen(server + "/", timeout=30) as r:
        page = r.read().decode()
    assert "/*SCRIPT*/" not in page and "function render" in page and "<script src" not in page


def test_the_server_listens_on_loopback_only(server):
    assert server.startswith("http://127.0.0.1:")


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    r = subprocess.run(KCHECK + ["explore", "two_phase", str(tmp_path / "none.json"), "--port", "0"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "does not exist" in r.stderr and r.stderr.strip().count("\n") == 0
    r = subprocess.run(KCHECK + ["explore", "two_phase", "--port", "70000"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "--port 70000" in r.stderr


def _start(*args):
    proc = subprocess.Popen(KCHECK + ["explore", *args, "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    if " at http://127.0.0.1:" not in line:
        proc.kill()
        pytest.fail(f"the explorer did not start: {line}{proc.stderr.read()}")
    return proc, line.split(" at ")[1].split()[0]


def _stop(proc):
    proc.send_signal(signal.SIGINT)
    code = proc.wait(timeout=60)
    assert code == 0 and "stopped" in proc.stderr.read()


@pytest.mark.browser
def test_explorer_in_headless_chromium(tmp_path):
    from browser_support import foreign_requests, page
    proc, url = _start("two_phase", str(TRACE))
    try:
        with page(viewport=(1300, 1000)) as pg:
            pg.goto(url)
            pg.wait_for_selector('#state tr[data-field="tm_state"]')
            value = pg.locator('#state tr[data-field="tm_state"] td.value')
            assert value.inner_text() == "init"
            # take TMAbort: the state changes as the spec says, and the changed fields are marked
            pg.click('button.take[data-label="TMAbort"]')
            pg.wait_for_function("document.querySelectorAll('#path li').length == 1")
            assert value.inner_text() == "aborted" and "changed" in value.get_attribute("class")
            assert pg.locator('#state tr[data-field="msg_abort"] td.value').inner_text() == "true"
            assert pg.locator('#state td.changed').count() == 2
            pg.click("#undo")
            pg.wait_for_function("document.querySelectorAll('#path li').length == 0")
            assert value.inner_text() == "init"
            # walk the loaded counterexample: consistent is violated after its third step
            verdict = pg.locator('#properties tr[data-property="consistent"] td.verdict')
            for n in (1, 2, 3):
                assert verdict.inner_text() == "holds"
                pg.click("#next")
                pg.wait_for_function(f"document.querySelectorAll('#path li').length == {n}")
            assert verdict.inner_text() == "VIOLATED"
            assert pg.locator("#next").is_disabled()
            pg.screenshot(path=str(tmp_path / "explorer-violated.png"), full_page=True)
            # another variant, then a trace loaded in the page: back to its variant, at its start
            pg.select_option("#variant", "lamport")
            pg.wait_for_function("document.querySelectorAll('#path li').length == 0")
            assert "variant lamport" in pg.inner_text("#meta")
            assert pg.locator("#trace-box").is_hidden()      # the trace belonged to the other variant
            pg.set_input_files("#file", str(TRACE))
            pg.wait_for_function("document.getElementById('meta').textContent.includes('commit-without-prepares')")
            assert "step 0 of 3" in pg.inner_text("#trace-name")
            assert "consistent.json" in pg.inner_text("#trace-name")
            pg.screenshot(path=str(tmp_path / "explorer.png"), full_page=True)
            assert pg.kcheck_errors == []
            assert foreign_requests(pg.kcheck_requests) == []
    finally:
        if proc.poll() is None:
            _stop(proc)


def _raw(url: str, path: str, body: bytes, length: str | None = None) -> tuple[int, str]:
    """A POST with the body and Content-Length given as they are (http.client, not urllib,
    which would set a correct length)."""
    import http.client
    from urllib.parse import urlparse
    u = urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.putrequest("POST", path)
    c.putheader("Content-Length", length if length is not None else str(len(body)))
    c.endheaders()
    if body:
        c.send(body)
    r = c.getresponse()
    status, text = r.status, r.read().decode()
    c.close()
    return status, text


@pytest.mark.parametrize("path,body,length,status,error", [
    ("/api/step", b'{"instance": 1e400}', None, 400, "instance must be an integer index"),
    ("/api/step", b'{"instance": "0"}', None, 400, "instance must be an integer index"),
    ("/api/step", b'[1, 2]', None, 400, "not a JSON object"),
    ("/api/step", b'\xff\xfe', None, 400, "not JSON"),
    ("/api/reset", b'{"initial": true}', None, 400, "initial must be an integer index"),
    ("/api/load", b'{"trace": 5}', None, 400, "a trace file holds a JSON object"),
    ("/api/load", b'{"trace": {"kcheck_trace": 2, "spec": "two_phase"}}', None, 400, "steps"),
    ("/api/step", b'{}', "abc", 400, "Content-Length 'abc' is not a number of bytes"),
    ("/api/step", b'', str(10 ** 12), 413, "larger than a trace's 64 MB"),
])
def test_the_explorer_answers_every_bad_request_in_one_line(server, path, body, length, status,
                                                             error):
    code, text = _raw(server, path, body, length)
    assert code == status, text
    message = json.loads(text)["error"]
    assert error in message and "\n" not in message
    code, _ = _raw(server, "/api/undo", b"{}")   # and it still serves
    assert code in (200, 400)


ZOMBIE = ROOT / "counterexamples" / "consumer_group" / "kip1251" / "no-zombie-commit.json"


@pytest.mark.browser
def test_the_violated_properties_show_at_the_top_beside_the_state():
    """After step 11 of the zombie commit, no-zombie-commit's violation was at the bottom of a
    page about 3,400 px tall (issue 37): it is now in the first screen, and the page is no wider
    than a 1280 px window."""
    from browser_support import VIEWPORT, overflow, page, screenshot
    proc, url = _start("consumer_group", str(ZOMBIE))
    try:
        with page(VIEWPORT) as pg:
            pg.goto(url)
            pg.wait_for_selector("#violations p")
            assert "properties holds in this state" in pg.inner_text("#violations")
            for n in range(1, 12):
                pg.click("#next")
                pg.wait_for_function(f"document.querySelectorAll('#path li').length == {n}")
            box = pg.locator("#violations")
            assert "violated" in box.get_attribute("class")
            names = [li.get_attribute("data-property") for li in box.locator("li").all()]
            assert "no-zombie-commit" in names
            # in the first screen, without scrolling, and above the state's table
            top = box.bounding_box()
            assert top["y"] + top["height"] <= VIEWPORT[1], top
            assert top["y"] < pg.locator("#state").bounding_box()["y"]
            # the properties table lists the violated ones first
            first = pg.locator("#properties tbody tr").first
            assert first.locator("td.verdict").inner_text() == "VIOLATED"
            screenshot(pg, "explorer-consumer_group-zombie-commit")
            assert overflow(pg) is None
            assert pg.kcheck_errors == []
    finally:
        if proc.poll() is None:
            _stop(proc)
