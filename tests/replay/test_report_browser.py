"""The replay report in a real browser: headless Chromium (Debian's ``chromium``) driven over
the DevTools protocol, the rendered DOM read back.

Console messages, uncaught exceptions and browser log entries (CSP violations, failed
loads) are collected from the protocol's events, so an error the page raises is seen
even when the page's own script is dead. Two control tests show that this capture does
catch errors. ``LORESCAN_CHROMIUM`` names another browser binary. Skipped when chromium or
``websockets`` is missing, unless ``LORESCAN_REQUIRE_BROWSER=1`` (CI) makes that a failure.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import need_shared
from tests.support.report_data import XSS_NAME, write_inputs

from lorescan import load
from lorescan.replay.report import _label, render_report, timeline_rows
from lorescan.replay.single import load_chat, replay_chat

REQUIRE = os.environ.get("LORESCAN_REQUIRE_BROWSER") == "1"
TURNS = 12


def _need(ok: bool, why: str) -> None:
    if ok:
        return
    if REQUIRE:
        pytest.fail(f"{why}, and LORESCAN_REQUIRE_BROWSER=1 makes the browser tests required", pytrace=False)
    pytest.skip(f"{why} (LORESCAN_REQUIRE_BROWSER=1 makes this a failure)")


def _chromium() -> str:
    """The browser: ``$LORESCAN_CHROMIUM`` if set, else ``chromium`` on the PATH or /usr/bin/chromium."""
    given = os.environ.get("LORESCAN_CHROMIUM")
    if given:
        path = given if os.access(given, os.X_OK) else None
    else:
        path = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    _need(path is not None, f"chromium is not installed ({given or 'apt-get install -y chromium'})")
    try:
        import websockets.sync.client  # noqa: F401
    except ImportError:
        _need(False, "the websockets package is missing (pip install '.[test]')")
    return str(path)


class Browser:
    """One headless Chromium and one page, over the DevTools protocol."""

    def __init__(self, exe: str, profile: str) -> None:
        from websockets.sync.client import connect
        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--remote-debugging-port=0", "--window-size=1280,1600", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as fh:
            targets = json.load(fh)
        page = next(t for t in targets if t.get("type") == "page")
        self.stack = contextlib.ExitStack()
        self.ws = self.stack.enter_context(connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30))
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        deadline = time.monotonic() + 60
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(e["method"] == method for e in self.events):
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if "method" in msg:
                self.events.append(msg)

    def open(self, path: Path) -> None:
        self.events.clear()
        self.call("Page.navigate", url=path.resolve().as_uri())
        self.wait_event("Page.loadEventFired")

    def js(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise AssertionError(f"test expression failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the middle of the element."""
        box = self.js(f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
                      "el.scrollIntoView({block: 'center', inline: 'center'});"
                      "const r = el.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def errors(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and browser log errors since the
        last :meth:`open`, as text."""
        self.call("Runtime.evaluate", expression="0")      # drain events that arrived meanwhile
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(f"console.{p['type']}: " + " ".join(str(a.get("value", a.get("description")))
                                                                 for a in p.get("args", [])))
            elif e["method"] == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                out.append(f"log {p['entry']['level']}: {p['entry']['text']}")
        return out

    def close(self) -> None:
        stack = getattr(self, "stack", None)
        if stack is not None:
            stack.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    exe = _chromium()
    with tempfile.TemporaryDirectory(prefix="lorescan-chromium-") as profile:
        b = Browser(exe, profile)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report written by the real command line, and the replay it shows (by the API)."""
    folder = tmp_path_factory.mktemp("report")
    book, chat = write_inputs(folder, TURNS)
    out = folder / "report.html"
    proc = subprocess.run([sys.executable, "-m", "lorescan", "replay", str(book), "--chat", str(chat),
                           "--report", str(out), "--seed", "3"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    replay = replay_chat([load(str(book))], load_chat(str(chat)), seed=3, chat=chat.name)
    return {"path": out, "replay": replay, "folder": folder}


def test_report_renders_charts_with_every_turn_and_entry(browser: Browser, made: dict[str, Any]) -> None:
    replay = made["replay"]
    rows, hidden = timeline_rows(replay)
    assert len(replay.turns) == TURNS and hidden == 0
    browser.open(made["path"])
    dom = browser.js("""(() => {
        const tl = document.getElementById('timeline'), bd = document.getElementById('budget');
        return {tlTurns: tl.getAttribute('data-turns'), cols: tl.querySelectorAll('rect.col').length,
                labels: Array.from(tl.querySelectorAll('text.row-label')).map(t => t.lastChild.textContent),
                on: tl.querySelectorAll('rect.on').length, cut: tl.querySelectorAll('rect.cut').length,
                tlWidth: tl.getBoundingClientRect().width, tlHeight: tl.getBoundingClientRect().height,
                bars: bd.querySelectorAll('rect.bar').length, line: bd.querySelectorAll('polyline.budget-line').length,
                ticks: Array.from(bd.querySelectorAll('text.tick-label')).map(t => t.textContent),
                options: document.querySelectorAll('#turn-select option').length,
                imgs: document.images.length, title: document.title,
                scripts: document.scripts.length};
    })()""")
    assert dom["tlTurns"] == str(TURNS) and dom["cols"] == TURNS
    assert dom["labels"] == [_label(replay.entries[e].name) for e in rows]
    assert dom["on"] == sum(len(t.fired) for t in replay.turns)
    assert dom["cut"] == sum(len(t.cut) for t in replay.turns) > 0
    assert dom["tlWidth"] > 300 and dom["tlHeight"] > 16 * len(rows)        # laid out, not collapsed
    assert dom["bars"] == TURNS and dom["line"] == 1
    assert "1" in dom["ticks"] and str(TURNS) in dom["ticks"]
    assert dom["options"] == TURNS
    assert dom["imgs"] == 0 and "pwned" not in dom["title"] and dom["scripts"] == 2
    assert browser.errors() == []


def _table(browser: Browser) -> dict[str, Any]:
    return browser.js("""(() => {
        const t = document.getElementById('explain');
        const rows = Array.from(t.querySelectorAll('tbody tr'));
        return {turn: t.getAttribute('data-turn'), rows: rows.length,
                fired: rows.filter(r => r.className === 'fired').map(r => r.cells[0].textContent),
                cut: rows.filter(r => r.className === 'cut').length,
                summary: document.getElementById('turn-summary').textContent,
                select: document.getElementById('turn-select').value};
    })()""")


def test_selecting_a_turn_shows_its_explain_table(browser: Browser, made: dict[str, Any]) -> None:
    replay = made["replay"]
    names = [e.name for e in replay.entries]
    browser.open(made["path"])
    first = _table(browser)
    busiest = max(replay.turns, key=lambda t: (len(t.fired), -t.number))
    assert first["turn"] == str(busiest.number) and first["rows"] == len(replay.entries)
    for turn in (replay.turns[0], replay.turns[-1], next(t for t in replay.turns if t.cut)):
        browser.js(f"(() => {{ const s = document.getElementById('turn-select'); s.value = '{turn.number}';"
                   "s.dispatchEvent(new Event('change')); })()")
        got = _table(browser)
        assert got["turn"] == str(turn.number) and got["select"] == str(turn.number)
        assert got["rows"] == len(replay.entries)
        assert sorted(got["fired"]) == sorted(names[i] for i in turn.fired)
        assert got["cut"] == len(turn.cut)
        assert got["summary"].startswith(f"Turn {turn.number}: {len(turn.fired)} fired")
    # a mouse click on a budget bar and on a timeline column selects that turn
    browser.click('#budget rect.bar[data-turn="2"]')
    assert _table(browser)["turn"] == "2"
    browser.click('#timeline rect.col[data-turn="5"]')
    got = _table(browser)
    assert got["turn"] == "5" and sorted(got["fired"]) == sorted(names[i] for i in replay.turns[4].fired)
    assert browser.js("document.querySelectorAll('.sel').length") == 2              # its column and its bar
    assert browser.errors() == []


def test_untrusted_names_render_as_text(browser: Browser, made: dict[str, Any]) -> None:
    replay = made["replay"]
    lantern = next(t for t in replay.turns if 1 in [int(replay.entries[i].id) for i in t.fired])
    browser.open(made["path"])
    browser.js(f"(() => {{ const s = document.getElementById('turn-select'); s.value = '{lantern.number}';"
               "s.dispatchEvent(new Event('change')); })()")
    cells = browser.js("Array.from(document.querySelectorAll('td')).map(td => td.textContent)")
    assert XSS_NAME in cells                                   # shown as the text it is
    assert browser.js("[document.images.length, document.querySelectorAll('b').length, document.scripts.length]") \
        == [0, 0, 2]
    assert browser.js("document.title").startswith("lorescan replay")
    assert browser.errors() == []


def test_capture_sees_errors_in_a_page(browser: Browser, tmp_path: Path) -> None:
    """Control: the error capture is not blind (an exception and a console.error)."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><title>x</title><script>console.error('boom'); nosuch();</script>",
                    encoding="utf-8")
    browser.open(page)
    errors = browser.errors()
    assert any("boom" in e for e in errors) and any("nosuch" in e for e in errors)


def test_csp_blocks_a_script_added_to_the_report(browser: Browser, made: dict[str, Any], tmp_path: Path) -> None:
    """Control: a script that is not the report's own is refused by its Content-Security-Policy,
    and the refusal is captured as an error."""
    tampered = tmp_path / "tampered.html"
    html = made["path"].read_text(encoding="utf-8")
    tampered.write_text(html.replace("</body>", "<script>document.title = 'pwned';</script></body>"),
                        encoding="utf-8")
    browser.open(tampered)
    assert "pwned" not in browser.js("document.title")
    assert any("Content Security Policy" in e for e in browser.errors())


def test_report_of_real_books_with_hundreds_of_entries(browser: Browser, tmp_path: Path) -> None:
    """Two corpus books (638 entries) and a 734-message corpus chat: the page stays usable
    (the charts scroll inside their boxes) and every turn's table is the engine's."""
    books = [need_shared("corpus/books/en-monster-hunter-387.json"), need_shared("corpus/books/en-weyland-251.json")]
    chat = need_shared("corpus/chats/en-dmc-group-branch734.jsonl")
    replay = replay_chat([load(str(b)) for b in books], load_chat(str(chat)), chat=chat.name)
    page = tmp_path / "big.html"
    page.write_text(render_report(replay), encoding="utf-8")
    rows, hidden = timeline_rows(replay)
    browser.open(page)
    dom = browser.js("""(() => {
        const box = document.getElementById('timeline-box'), tl = document.getElementById('timeline');
        return {cols: tl.querySelectorAll('rect.col').length, labels: tl.querySelectorAll('text.row-label').length,
                bars: document.querySelectorAll('#budget rect.bar').length,
                boxHeight: box.getBoundingClientRect().height, chartHeight: tl.getBoundingClientRect().height,
                never: document.querySelectorAll('#never-fired tbody tr').length};
    })()""")
    assert dom["cols"] == dom["bars"] == len(replay.turns) > 400
    assert dom["labels"] == len(rows) and hidden == 0
    assert dom["chartHeight"] > 700 and dom["boxHeight"] <= 640      # taller than its box: the box scrolls
    assert dom["never"] == sum(1 for i in range(len(replay.entries)) if not any(i in t.fired for t in replay.turns))
    names = [e.name for e in replay.entries]
    for turn in (replay.turns[0], replay.turns[len(replay.turns) // 2], replay.turns[-1]):
        browser.js(f"(() => {{ const s = document.getElementById('turn-select'); s.value = '{turn.number}';"
                   "s.dispatchEvent(new Event('change')); })()")
        got = _table(browser)
        assert got["rows"] == len(replay.entries) and got["cut"] == len(turn.cut)
        assert sorted(got["fired"]) == sorted(names[i] for i in turn.fired)
    assert browser.errors() == []


def test_the_explain_table_marks_each_matched_span_and_its_case(browser: Browser, tmp_path: Path) -> None:
    """tests/data/spans: a key inside a longer word, a regex across two messages, a key in a
    recursion text; the last turn's table marks each matched text and names its case."""
    data = Path(__file__).resolve().parent.parent / "data" / "spans"
    replay = replay_chat([load(str(data / "book.json"))], load_chat(str(data / "chat.jsonl")),
                         settings={"scan_depth": 3, "recursive": True}, chat="spans.jsonl")
    page = tmp_path / "spans.html"
    page.write_text(render_report(replay), encoding="utf-8")
    browser.open(page)
    last = replay.turns[-1].number
    browser.js(f"(() => {{ const s = document.getElementById('turn-select'); s.value = '{last}';"
               "s.dispatchEvent(new Event('change')); })()")
    cells = browser.js("""(() => {
        const out = {};
        for (const tr of document.querySelectorAll('#explain tbody tr')) {
            const td = tr.querySelector('td.matched');
            out[tr.cells[0].textContent] = {
                mark: Array.from(td.querySelectorAll('mark')).map(m => m.textContent),
                context: Array.from(td.querySelectorAll('.context')).map(c => c.textContent),
                cases: Array.from(td.querySelectorAll('.case')).map(c => c.getAttribute('data-case')),
                where: Array.from(td.querySelectorAll('.where')).map(c => c.textContent)};
        }
        return out;
    })()""")
    assert cells["Race"]["mark"] == ["race"] and cells["Race"]["cases"] == ["inside_word"]
    assert cells["Race"]["context"] == ["You: She ran to embrace her brother at the door."]
    assert "inside the longer word \u2018embrace\u2019" in cells["Race"]["where"][0]
    assert cells["Storm warning"]["mark"] == ["storm\u23ceYou: Is coming"]
    assert cells["Storm warning"]["cases"] == ["across"]
    assert cells["Storm warning"]["where"] == ["message 2 into message 1"]
    assert cells["Saltmere guild"]["mark"] == ["Saltmere"] and cells["Saltmere guild"]["cases"] == ["recursion"]
    assert cells["Saltmere guild"]["where"] == ["recursion text 1, the content of spans.2"]
    assert cells["Lighthouse"]["mark"] == ["lighthouse"] and cells["Lighthouse"]["cases"] == []
    # the mark is laid out (visible), and the case badge reads as words
    assert browser.js("document.querySelector('#explain mark').getBoundingClientRect().width") > 0
    assert browser.js("document.querySelector('#explain .case[data-case=\"across\"]').textContent") == \
        "across two texts"
    assert browser.errors() == []


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report book with a sticky and a cooldown entry, and an edited copy under another
    book name (entry 'Bread' keyed on a word the chat never says), replayed and compared."""
    from tests.support.report_data import book_json
    folder = tmp_path_factory.mktemp("rich")
    _, chat = write_inputs(folder, TURNS)
    data = book_json()
    data["entries"]["2"]["sticky"] = 5              # river
    data["entries"]["3"]["cooldown"] = 5            # market
    (folder / "base.json").write_text(json.dumps(data), encoding="utf-8")
    data["name"] = "Report <Book> v2"
    data["entries"]["4"]["key"] = ["nothing-says-this"]
    (folder / "v2.json").write_text(json.dumps(data), encoding="utf-8")
    out = folder / "rich.html"
    proc = subprocess.run([sys.executable, "-m", "lorescan", "replay", str(folder / "base.json"), "--chat", str(chat),
                           "--compare", str(folder / "v2.json"), "--report", str(out), "--seed", "3"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    base = replay_chat([load(str(folder / "base.json"))], load_chat(str(chat)), seed=3)
    other = replay_chat([load(str(folder / "v2.json"))], load_chat(str(chat)), seed=3)
    return {"path": out, "replay": base, "other": other, "stdout": proc.stdout}


def test_clicking_an_entry_drills_down_to_every_turn(browser: Browser, rich: dict[str, Any]) -> None:
    replay = rich["replay"]
    river = next(i for i, e in enumerate(replay.entries) if e.name == "River")
    browser.open(rich["path"])
    browser.click(f'#most-used td.entry-link[data-entry="{river}"]')
    got = browser.js("""(() => {
        const t = document.getElementById('entry-turns');
        const rows = Array.from(t.querySelectorAll('tbody tr'));
        return {entry: t.getAttribute('data-entry'), summary: document.getElementById('entry-summary').textContent,
                rows: rows.map(r => ({turn: r.cells[0].textContent, cls: r.className, reason: r.cells[2].textContent,
                                      mark: Array.from(r.querySelectorAll('mark')).map(m => m.textContent)}))};
    })()""")
    assert got["entry"] == str(river) and len(got["rows"]) == len(replay.turns)
    fired = [str(t.number) for t in replay.turns if river in t.fired]
    assert [r["turn"] for r in got["rows"] if r["cls"] == "fired"] == fired and fired
    assert got["summary"].startswith(f"River (Report <Book> #2): fired on {len(fired)} of {len(replay.turns)} turns")
    for r, t in zip(got["rows"], replay.turns):
        x = next(x for x in t.explained if x.entry == river)
        assert r["reason"] == x.reason                                  # why, on every turn
        assert r["mark"] == (["river"] if x.reason == "key" else [])    # the matched text where a key fired
    # a timeline row label drills down too
    browser.click(f'#timeline text.row-label[data-entry="{river}"]')
    assert browser.js("document.getElementById('entry-turns').getAttribute('data-entry')") == str(river)
    assert browser.errors() == []


def test_search_filters_every_table(browser: Browser, rich: dict[str, Any]) -> None:
    browser.open(rich["path"])

    def visible(table: str) -> list[str]:
        return browser.js(f"Array.from(document.querySelectorAll('#{table} tbody tr')).filter(r => "
                          "getComputedStyle(r).display !== 'none').map(r => r.textContent)")
    everything = visible("explain")
    browser.js("(() => { const s = document.getElementById('search'); s.value = 'STORM';"
               "s.dispatchEvent(new Event('input')); })()")
    hits = visible("explain")
    assert hits and len(hits) < len(everything) and all("storm" in h.lower() for h in hits)
    assert all("storm" in h.lower() for h in visible("most-used"))
    assert all("storm" in h.lower() for h in visible("entry-turns"))
    browser.js("(() => { const s = document.getElementById('search'); s.value = '';"
               "s.dispatchEvent(new Event('input')); })()")
    assert visible("explain") == everything
    assert browser.errors() == []


def test_clicking_a_header_sorts_its_table(browser: Browser, rich: dict[str, Any]) -> None:
    browser.open(rich["path"])

    def column(k: int) -> list[str]:
        return browser.js(f"Array.from(document.querySelectorAll('#most-used tbody tr')).map(r => r.cells[{k}].textContent)")
    browser.click("#most-used th:nth-child(4)")                 # turns fired
    up = [int(v) for v in column(3)]
    assert up == sorted(up) and browser.js("document.querySelector('#most-used th:nth-child(4)').dataset.sort") == "asc"
    browser.click("#most-used th:nth-child(4)")
    assert [int(v) for v in column(3)] == sorted(up, reverse=True)
    browser.click("#most-used th:nth-child(1)")                 # entry names, as text
    names = column(0)
    assert names == sorted(names, key=lambda n: n.casefold()) or names == sorted(names)
    assert browser.errors() == []


def test_the_compare_view_lists_the_turns_that_differ(browser: Browser, rich: dict[str, Any]) -> None:
    base, other = rich["replay"], rich["other"]

    def names(rep: Any, t: Any) -> set[str]:
        return {rep.entries[i].name for i in t.fired}
    truth = [t.number for t, u in zip(base.turns, other.turns) if names(base, t) != names(other, u)]
    assert 0 < len(truth) < len(base.turns)
    assert f"compare: {len(truth)} of {len(base.turns)} turns fire differently" in rich["stdout"]
    browser.open(rich["path"])
    rows = browser.js("Array.from(document.querySelectorAll('#compare-turns tbody tr')).map(r => "
                      "[r.getAttribute('data-turn'), r.cells[1].textContent, r.cells[2].textContent])")
    assert [int(r[0]) for r in rows] == truth
    for turn, only_base, only_compare in rows:
        t, u = base.turns[int(turn) - 1], other.turns[int(turn) - 1]
        assert set(filter(None, only_base.split(", "))) == names(base, t) - names(other, u)
        assert set(filter(None, only_compare.split(", "))) == names(other, u) - names(base, t)
    assert f"{len(truth)} of {len(base.turns)} turns fire differently" in \
        browser.js("document.getElementById('compare-summary').textContent")
    browser.click(f'#compare-turns tr[data-turn="{truth[-1]}"]')
    assert _table(browser)["turn"] == str(truth[-1])
    assert browser.errors() == []


def test_the_timed_effect_lane_shows_sticky_and_cooldown_turns(browser: Browser, rich: dict[str, Any]) -> None:
    replay = rich["replay"]
    browser.open(rich["path"])
    got = browser.js("""(() => {
        const lane = document.getElementById('timed');
        const cells = cls => Array.from(lane.querySelectorAll('rect.' + cls)).map(r => r.getAttribute('data-state-turn'));
        return {sticky: cells('sticky'), cooldown: cells('cooldown'),
                labels: Array.from(lane.querySelectorAll('text.row-label')).map(t => t.lastChild.textContent)};
    })()""")
    for state in ("sticky", "cooldown"):
        want = sorted(str(t.number) for t in replay.turns for x in t.explained if x.reason == state)
        assert sorted(got[state]) == want and want, state
    assert set(got["labels"]) == {"River", "Market"}
    browser.click('#timed rect.col[data-turn="3"]')
    assert _table(browser)["turn"] == "3"
    assert browser.errors() == []


def test_a_janitor_report_explains_each_turn_and_names_apply_limit(browser: Browser, tmp_path: Path) -> None:
    from conftest import TESTS_DIR
    from lorescan.formats.janitor import read_janitor_json
    from lorescan.replay.chats import Message
    case = json.loads((TESTS_DIR / "conformance" / "janitor" / "books.json").read_text())["cases"][0]
    chat = max((t["context"]["chat"]["last_messages"] for t in case["turns"]), key=len)
    name = case["turns"][0]["context"]["character"]["name"]
    messages = [Message(name if m["is_bot"] else "User", m["message"], not m["is_bot"], False) for m in chat]
    replay = replay_chat([read_janitor_json(case["book"])], messages, mode="janitor", chat="chat.json")
    path = tmp_path / "janitor.html"
    path.write_text(render_report(replay), encoding="utf-8")
    browser.open(path)
    names = [e.name for e in replay.entries]
    for turn in (replay.turns[0], next(t for t in replay.turns if t.cut)):
        browser.js(f"(() => {{ const s = document.getElementById('turn-select'); s.value = '{turn.number}';"
                   "s.dispatchEvent(new Event('change')); })()")
        got = _table(browser)
        assert got["turn"] == str(turn.number) and got["rows"] == len(replay.entries)
        assert sorted(got["fired"]) == sorted(names[i] for i in turn.fired) and got["cut"] == len(turn.cut)
        assert got["summary"].startswith(f"Turn {turn.number}: {len(turn.fired)} fired, {len(turn.cut)} cut by "
                                         "APPLY_LIMIT, ") and "tokens" not in got["summary"]
    assert browser.js("document.getElementById('budget')") is None
    assert browser.errors() == []
