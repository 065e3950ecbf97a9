"""``lorescan scan/explain --mode janitor``: a raw dynamicLore array and a chat file give the
script's result (checked against the conformance vectors whose books roll no probability)."""
from __future__ import annotations

import json

import pytest

from conftest import TESTS_DIR
from lorescan.app.cli import main

JANITOR = TESTS_DIR / "conformance" / "janitor"


def _turns(with_settings=False):
    for path in sorted(JANITOR.glob("*.json")):
        for case in json.loads(path.read_text())["cases"]:
            if not isinstance(case["book"], list) or "probability" in json.dumps(case["book"]):
                continue                          # the command seeds its own random values
            for t in case["turns"]:
                ctx = t["context"]
                chat = ctx.get("chat") or {}
                lm = chat.get("last_messages")
                ch = ctx.get("character") or {}
                if (bool(t["settings"]) != with_settings or t["expected"]["error"] or not isinstance(lm, list) or not lm
                        or not all(isinstance(m, dict) and isinstance(m.get("message"), str) and m["message"].strip()
                                   for m in lm)
                        or chat.get("message_count") != len(lm) or not isinstance(ch.get("name"), str)
                        or not isinstance(ch.get("personality"), str) or not isinstance(ch.get("scenario"), str)):
                    continue
                yield case, t


TURNS = list(_turns())
KNOB_TURNS = list(_turns(with_settings=True))


def _files(tmp_path, case, turn):
    book = tmp_path / "book.json"
    book.write_text(json.dumps(case["book"]))
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"name": "Bot" if m.get("is_bot") else "User", "mes": m["message"]}
                                for m in turn["context"]["chat"]["last_messages"]]))
    return str(book), str(chat)


def test_there_are_vector_turns_to_replay():
    assert len(TURNS) >= 30


def _script(tmp_path, case, knobs):
    """The case's book as a JanitorAI script (JSON text is a JavaScript literal) declaring ``knobs``."""
    path = tmp_path / "book.js"
    decls = "".join(f"const {name} = {json.dumps(value)};\n" for name, value in knobs.items())
    path.write_text(f"// lorebook\n{decls}const dynamicLore = {json.dumps(case['book'], indent=1)};\n"
                    "/* the engine would follow here */\n")
    return str(path)


def _assert_vector(got, turn, name):
    ch = turn["context"]["character"]
    want = turn["expected"]
    assert ch["personality"] + got["personality"] == want["personality"], name
    assert ch["scenario"] + got["scenario"] == want["scenario"], name
    for k in ("haystack", "direct", "triggered", "selected", "post_shift", "tags", "active_name"):
        assert got["trace"][k] == want["trace"][k], (name, k)


def _scan(book, chat, turn, capsys, *flags):
    assert main(["scan", "--mode", "janitor", book, "--chat", chat, "--character",
                 turn["context"]["character"]["name"], "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out)["result"]


def test_scan_json_gives_the_vectors_results(tmp_path, capsys):
    for case, turn in TURNS:
        book, chat = _files(tmp_path, case, turn)
        _assert_vector(_scan(book, chat, turn, capsys), turn, case["name"])


def test_there_are_vector_turns_with_knobs():
    assert len(KNOB_TURNS) >= 10
    assert {"apply_limit", "window_depth"} <= {k for _, t in KNOB_TURNS for k in t["settings"]}


def test_a_script_book_runs_with_its_declared_knobs(tmp_path, capsys):
    for case, turn in KNOB_TURNS:
        _, chat = _files(tmp_path, case, turn)
        knobs = {k.upper(): v for k, v in turn["settings"].items()}
        book = _script(tmp_path, case, knobs)
        _assert_vector(_scan(book, chat, turn, capsys), turn, case["name"])


def test_flags_override_the_scripts_knobs(tmp_path, capsys):
    for case, turn in KNOB_TURNS:
        _, chat = _files(tmp_path, case, turn)
        other = {"apply_limit": 0, "window_depth": 1}
        book = _script(tmp_path, case, {k.upper(): other[k] for k in turn["settings"]})     # overridden below
        flags = [x for k, v in turn["settings"].items() for x in (f"--{k.replace('_', '-')}", json.dumps(v))]
        _assert_vector(_scan(book, chat, turn, capsys, *flags), turn, case["name"])


def test_a_script_without_knobs_uses_the_defaults(tmp_path, capsys):
    for case, turn in TURNS[:20]:
        _, chat = _files(tmp_path, case, turn)
        _assert_vector(_scan(_script(tmp_path, case, {}), chat, turn, capsys), turn, case["name"])


def test_a_script_that_runs_code_is_refused_with_its_location(tmp_path, capsys):
    book = tmp_path / "book.js"
    book.write_text('var dynamicLore = [{"keywords": ["a"], "personality": alert(1)}];\n')
    chat = tmp_path / "chat.json"
    chat.write_text('[{"name": "User", "mes": "hi"}]')
    assert main(["scan", "--mode", "janitor", str(book), "--chat", str(chat)]) == 2
    err = capsys.readouterr().err
    assert "book.js" in err and "Traceback" not in err


def test_scan_and_explain_print_the_applied_entries_and_the_reasons(tmp_path, capsys):
    case = next(c for c, _ in TURNS if c["name"] == "tags/basic-trigger")
    turn = case["turns"][0]
    book, chat = _files(tmp_path, case, turn)
    assert main(["scan", "--mode", "janitor", book, "--chat", chat, "--why", "--color", "never"]) == 0
    text = capsys.readouterr().out
    assert "Applied (2):" in text and "entry[1]: tag \"t1\" emitted" in text and "Not applied:" in text
    assert main(["explain", "--mode", "janitor", book, "--chat", chat, "--entry", "2"]) == 0
    assert capsys.readouterr().out.rstrip().endswith('entry[2] silent: its tag "t2" was not emitted')


@pytest.mark.parametrize("argv, field", [
    (["--entry", "dragon"], "--entry"), (["--entry", "9"], "--entry"),
])
def test_bad_janitor_arguments_are_located_errors(tmp_path, capsys, argv, field):
    case = next(c for c, _ in TURNS if c["name"] == "tags/basic-trigger")
    book, chat = _files(tmp_path, case, case["turns"][0])
    assert main(["explain", "--mode", "janitor", book, "--chat", chat, *argv]) == 2
    assert field in capsys.readouterr().err


def test_a_book_that_is_not_an_array_is_refused(tmp_path, capsys):
    book = tmp_path / "book.json"
    book.write_text('{"entries": []}')
    chat = tmp_path / "chat.json"
    chat.write_text('[{"name": "User", "mes": "hi"}]')
    assert main(["scan", "--mode", "janitor", str(book), "--chat", str(chat)]) == 2
    err = capsys.readouterr().err
    assert "book.json" in err and "JSON array" in err
