"""The lorescan command as a user meets it: scan and explain end to end (arguments, files, exit
status, what is printed), through its main() in this process and, for each command at least once,
through a real subprocess."""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from lorescan.app.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BOOK = str(EXAMPLES / "saltmere.json")
PERSONA = str(EXAMPLES / "rowan-persona.json")
CHAT = str(EXAMPLES / "saltmere-chat.jsonl")


def run_subprocess(*args, env=None):
    """``python -m lorescan ARGS`` in a real subprocess (each command keeps at least one test so)."""
    full_env = dict(os.environ, **(env or {}))
    # a timeout: a regression that starts `serve` instead of refusing its flags fails, not hangs
    return subprocess.run([sys.executable, "-m", "lorescan", *args], capture_output=True, text=True, env=full_env,
                          timeout=300)


def run(*args, env=None):
    """The command's ``main(ARGS)`` in this process, with ``env`` set and stdout/stderr captured:
    what a subprocess gives (exit status, output, a traceback as text) without its start-up."""
    out, err = io.StringIO(), io.StringIO()
    saved = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:                   # argparse's usage errors and --help
                code = exc.code
                if code is not None and not isinstance(code, int):
                    print(code, file=sys.stderr)
                    code = 1
            except Exception:                           # noqa: BLE001 - what the interpreter would print
                traceback.print_exc()
                code = 1
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return subprocess.CompletedProcess(["lorescan", *args], code or 0, out.getvalue(), err.getvalue())


def failed_cleanly(r, *words):
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)


def st_book(tmp_path, entries, name="Book", **fields):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"name": name, **fields, "entries": {
        str(i): {"uid": i, "keysecondary": [], "comment": f"e{i}", "content": f"content {i}", "constant": False,
                 "selective": True, "selectiveLogic": 0, "order": 100 - i, "position": 0, "disable": False, **e}
        for i, e in enumerate(entries)}}))
    return str(path)


def chat_file(tmp_path, texts, name="chat.jsonl", meta=True):
    lines = [json.dumps({"user_name": "Rowan", "character_name": "Narrator"})] if meta else []
    lines += [json.dumps({"name": "Rowan" if i % 2 else "Narrator", "is_user": bool(i % 2), "mes": t})
              for i, t in enumerate(texts)]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# -- scan --------------------------------------------------------------------------------
def test_scan_of_the_bundled_example_lists_what_fires_and_why():
    r = run_subprocess("scan", BOOK, "--chat", CHAT)
    assert r.returncode == 0, r.stderr
    assert ('#1 Lighthouse: key "lighthouse" matched in message 4, the newest: '
            '"Rowan: On the way I look up at the dark [lighthouse]. Who keeps it?" (loop 1)') in r.stdout
    assert "#0 Setting: constant entry" in r.stdout
    assert "Mode: sillytavern, compat sillytavern, seed 0" in r.stdout


def test_the_old_positional_book_chat_form_still_works():
    assert run("scan", BOOK, CHAT).stdout == run("scan", BOOK, "--chat", CHAT).stdout


def test_regex_keys_print_as_written_not_as_python_reprs():
    r = run("scan", BOOK, "--chat", CHAT)
    assert r"key /\bstorm(s|y)?\b/i matched" in r.stdout
    assert r"\\b" not in r.stdout


def test_scan_json_output_carries_the_result_and_a_diagnostic_per_entry():
    r = run("scan", BOOK, "--chat", CHAT, "--json", "--depth", "4", "--recursive")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    book = json.loads(Path(BOOK).read_text())
    assert len(data["entries"]) == len(book["entries"])
    activated = {(a["world"], a["uid"]) for a in data["result"]["activated"]}
    for d in data["entries"]:
        assert (d["outcome"] == "activated") == ((d["world"], d["uid"]) in activated)
    assert ("Saltmere", 3) in activated, "the Tollman fires through two recursion steps"
    tollman = next(d for d in data["entries"] if d["uid"] == 3)
    assert tollman["loop"] == 3 and "the content of #2 Ida Marsh" in tollman["text"]
    assert data["settings"]["scan_depth"] == {"value": 4, "from": "--scan-depth"}
    assert data["settings"]["recursive"] == {"value": True, "from": "--recursive"}
    assert data["settings"]["budget_cap"] == {"value": 0, "from": "default"}


def test_the_same_seed_gives_byte_identical_output_and_seeds_change_group_rolls():
    outs = {seed: run("scan", BOOK, "--chat", CHAT, "--seed", str(seed)).stdout for seed in range(8)}
    assert run("scan", BOOK, "--chat", CHAT, "--seed", "5").stdout == outs[5]
    assert run("explain", BOOK, "--chat", CHAT, "--seed", "5", "--json").stdout == \
        run("explain", BOOK, "--chat", CHAT, "--seed", "5", "--json").stdout
    winners = {("version A" in o.split("Prompt placement")[0]) for o in outs.values()}
    assert winners == {True, False}, "the tavern group's roll follows the seed"


def test_several_books_with_sources_macros_and_the_character_filter():
    r = run("scan", BOOK, f"persona:{PERSONA}", "--chat", CHAT, "--json")
    data = json.loads(r.stdout)
    assert [(b["name"], b["source"], b["source_from"]) for b in data["books"]] == [
        ("Saltmere", "global", "default"), ("Rowan (persona)", "persona", "prefix")]
    assert data["character"]["name"] == "Narrator" and data["user"]["name"] == "Rowan"
    before = data["result"]["world_info_before"]
    assert "Rowan is a mapmaker from the inland hills who has never seen the sea. Narrator knows it." in before
    fired = {(d["world"], d["uid"]) for d in data["entries"] if d["outcome"] == "activated"}
    assert ("Rowan (persona)", 0) in fired, "the {{user}} key is substituted before matching"
    assert ("Rowan (persona)", 4) in fired, "the character filter names the Narrator"
    other = json.loads(run("scan", BOOK, f"persona:{PERSONA}", "--chat", CHAT, "--json",
                           "--character", "Mira", "--user", "Ash").stdout)
    reasons = {(d["world"], d["uid"]): d["reason"] for d in other["entries"]}
    assert reasons[("Rowan (persona)", 4)] == "character_filter"
    assert reasons[("Rowan (persona)", 0)] == "no_key_match", "{{user}} is now Ash, who is not in the chat"
    by_id = json.loads(run("scan", BOOK, f"persona:{PERSONA}", "--chat", CHAT, "--json", "--character", "Mira",
                           "--character-id", "Narrator", "--tag", "sea").stdout)
    assert by_id["character"] == {"name": "Mira", "filter_id": "Narrator", "tags": ["sea"], "from": "--character"}
    assert {(d["world"], d["uid"]): d["reason"] for d in by_id["entries"]}[("Rowan (persona)", 4)] == "constant"


def test_book_source_flag_sets_each_unprefixed_books_source(tmp_path):
    r = run("scan", BOOK, PERSONA, "--book-source", "chat", "--book-source", "persona", "--chat", CHAT, "--json")
    assert [(b["source"], b["source_from"]) for b in json.loads(r.stdout)["books"]] == [
        ("chat", "--book-source"), ("persona", "--book-source")]
    failed_cleanly(run("scan", BOOK, PERSONA, "--book-source", "chat", "--chat", CHAT), "--book-source")


def test_every_st_setting_is_a_flag_with_its_default_in_help():
    from lorescan.st import STSettings
    import dataclasses
    text = " ".join(run("scan", "--help").stdout.split())
    for f in dataclasses.fields(STSettings):
        assert "--" + f.name.replace("_", "-") in text, f.name
        shown = f.default if isinstance(f.default, str) else json.dumps(f.default)
        assert f"(default: {shown})" in text
    assert "--mode {sillytavern,slot,janitor}" in text and "(default: sillytavern)" in text
    assert "(default: 8192)" in text


def test_book_settings_are_honoured_then_overridden_and_the_output_says_which(tmp_path):
    book = st_book(tmp_path, [{"key": ["anchor"]}], scan_depth=3, token_budget=500, recursive_scanning=True)
    chat = chat_file(tmp_path, ["the anchor", "b", "c"])
    data = json.loads(run("scan", book, "--chat", chat, "--json").stdout)
    assert data["settings"]["scan_depth"] == {"value": 3, "from": "scan_depth of book 'Book'"}
    assert data["settings"]["budget_cap"] == {"value": 500, "from": "token_budget of book 'Book'"}
    assert data["entries"][0]["outcome"] == "activated", "the book's depth of 3 reaches the first message"
    settings = tmp_path / "s.toml"
    settings.write_text("scan_depth = 1\n")
    r = run("scan", book, "--chat", chat, "--settings", str(settings), "--budget-cap", "0")
    assert "book 'Book' sets scan_depth 3, overridden by --settings" in r.stdout
    assert "book 'Book' sets token_budget 500, overridden by --budget-cap" in r.stdout
    assert "recursive true (recursive_scanning of book 'Book')" in r.stdout
    ignored = json.loads(run("scan", book, "--chat", chat, "--json", "--ignore-book-settings").stdout)
    assert ignored["settings"]["scan_depth"] == {"value": 2, "from": "default"}
    odd = st_book(tmp_path, [{"key": ["anchor"]}], name="Odd", scan_depth="deep")
    failed_cleanly(run("scan", odd, "--chat", chat), "scan_depth of book 'Odd'", "--ignore-book-settings")
    assert run("scan", odd, "--chat", chat, "--ignore-book-settings").returncode == 0
    js = tmp_path / "s.json"
    js.write_text(json.dumps({"scan_depth": 5, "insertion_strategy": "evenly"}))
    data = json.loads(run("scan", book, "--chat", chat, "--json", "--settings", str(js)).stdout)
    assert data["settings"]["insertion_strategy"]["value"] == "evenly"


def test_slot_mode_runs_the_slot_engine():
    r = run("scan", BOOK, "--chat", CHAT, "--mode", "slot")
    assert r.returncode == 0, r.stderr
    assert "Mode: slot, seed 0, budget 800 tokens" in r.stdout and "Lorebook slot:" in r.stdout
    assert r"key /\bstorm(s|y)?\b/i matched" in r.stdout
    data = json.loads(run("explain", BOOK, "--chat", CHAT, "--mode", "slot", "--json").stdout)
    assert {e["outcome"] for e in data["entries"]} == {"inserted"}
    failed_cleanly(run("scan", BOOK, "--chat", CHAT, "--mode", "slot", "--scan-depth", "3"),
                   "--scan-depth", "slot mode")


# -- chats -------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", ["jsonl", "jsonl_no_meta", "name_mes", "role_content", "messages_object"])
def test_every_chat_shape_gives_the_same_scan(tmp_path, shape):
    texts = ["hello there", "the lighthouse is dark"]
    if shape == "jsonl":
        path = chat_file(tmp_path, texts)
    elif shape == "jsonl_no_meta":
        path = chat_file(tmp_path, texts, meta=False)
    else:
        msgs = [{"name": "N", "mes": texts[0]}, {"name": "R", "mes": texts[1], "is_user": True}]
        if shape == "role_content":
            msgs = [{"role": "assistant", "content": texts[0]}, {"role": "user", "content": texts[1]}]
        doc = {"messages": msgs} if shape == "messages_object" else msgs
        path = str(tmp_path / "chat.json")
        Path(path).write_text(json.dumps(doc))
    data = json.loads(run("scan", BOOK, "--chat", path, "--json").stdout)
    assert data["chat"]["messages"] == 2
    assert ("Saltmere", 1) in {(a["world"], a["uid"]) for a in data["result"]["activated"]}


@pytest.mark.parametrize("content, words", [
    ('{"user_name": "x"}\n{"name": "A", "mes": "hi"}\n{"name": "B"}\n', ["message 2 (line 3)", "'mes'"]),
    ('[{"name": "A", "mes": "hi"}, {"name": "B", "mes": 3}]', ["message 2", "'mes'"]),
    ('[{"role": "user", "content": "hi"}, {"role": "wizard", "content": "x"}]', ["message 2", "'role'"]),
    ('{"messages": {"a": 1}}', ["'messages'", "must be a list"]),
    ('{"chat": []}', ["no messages", '{"messages": [...]}']),
    ('"just a string"', ["message 1", "must be an object"]),
    ("", ["empty"]),
    ('{"name": "A", "mes": "hi"}\nnot json\n', ["line 2"]),
    ("[3]", ["message 1", "object"]),
])
def test_a_chat_of_the_wrong_shape_is_an_error_naming_the_file_and_message(tmp_path, content, words):
    chat = tmp_path / "chat.jsonl"
    chat.write_text(content)
    r = run("scan", BOOK, "--chat", str(chat))
    failed_cleanly(r, str(chat), *words)
    assert "entry" not in r.stderr


# -- explain -----------------------------------------------------------------------------
def test_explain_names_the_near_misses_of_the_bundled_examples():
    r = run_subprocess("explain", BOOK, f"persona:{PERSONA}", "--chat", CHAT, "--scan-depth", "3", "--seed", "1")
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert 'key "fish" occurs only inside a longer word ("fisherman") in message 2; whole words are on' in out
    assert ('key "Pier" occurs only with a different case as "pier" in message 3; the entry is case-sensitive'
            in out)
    assert 'key "fog" occurs in message 1, 1 message beyond the scan depth of 3' in out
    assert 'secondary logic AND ANY: not found there: "ale", "wine"' in out
    assert "group 'tavern': lost the weighted roll to Saltmere #7 Tavern, version B" in out
    assert "6 entries of 14 fired" in out


def test_explain_plurals_and_the_depth_distance(tmp_path):
    book = st_book(tmp_path, [{"key": ["anchor"]}])
    chat = chat_file(tmp_path, ["the anchor", "b", "c", "d"])
    out = run("explain", book, "--chat", chat).stdout
    assert 'key "anchor" occurs in message 1, 2 messages beyond the scan depth of 2' in out
    assert "0 entries of 1 fired" in out
    out = run("explain", book, "--chat", chat, "--scan-depth", "3").stdout
    assert "1 message beyond the scan depth of 3" in out and "1 messages" not in out


def test_explain_reports_budget_probability_and_timed_effects(tmp_path):
    book = st_book(tmp_path, [
        {"key": ["sea"], "content": "word " * 100},
        {"key": ["sea"], "useProbability": True, "probability": 0},
        {"key": ["sea"], "content": "more " * 400},
        {"key": ["sea"], "delay": 10},
    ])
    chat = chat_file(tmp_path, ["the sea"])
    data = json.loads(run("explain", book, "--chat", chat, "--max-context", "1000", "--json").stdout)
    by_uid = {d["uid"]: d for d in data["entries"]}
    assert by_uid[0]["outcome"] == "activated"
    assert by_uid[1]["reason"] == "probability" and "above probability 0" in by_uid[1]["text"]
    assert by_uid[2]["reason"] == "budget" and "would reach the budget of 250" in by_uid[2]["text"]
    assert by_uid[3]["reason"] == "delay" and by_uid[3]["text"] == "chat has 1 message, delay is 10"


def test_explain_one_entry_by_uid_book_uid_or_name():
    for sel in ("1", "Saltmere.1", "lighthouse"):
        r = run("explain", BOOK, "--chat", CHAT, "--entry", sel)
        assert r.returncode == 0, r.stderr
        assert "#1 Lighthouse" in r.stdout and "#2 Ida" not in r.stdout and "1 entry of 1 fired" in r.stdout
    failed_cleanly(run("explain", BOOK, "--chat", CHAT, "--entry", "nobody"), "--entry", "'nobody'")


def test_names_with_line_breaks_do_not_break_the_table(tmp_path):
    book = st_book(tmp_path, [{"key": ["anchor"], "comment": "two\nlines\x1b[31m"}, {"key": ["zzz"]}])
    chat = chat_file(tmp_path, ["the anchor"])
    out = run("explain", book, "--chat", chat).stdout
    row = next(line for line in out.splitlines() if "two" in line)
    assert "two⏎lines?[31m" in row and "fired" in row
    assert "\x1b" not in out


def test_colour_on_request_and_never_when_piped_or_no_color():
    assert "\x1b[" not in run_subprocess("explain", BOOK, "--chat", CHAT).stdout
    assert "\x1b[32m" in run_subprocess("explain", BOOK, "--chat", CHAT, "--color", "always").stdout
    assert "\x1b[" not in run_subprocess("explain", BOOK, "--chat", CHAT, env={"NO_COLOR": "1"}).stdout


# -- bad input -----------------------------------------------------------------------------
def test_a_malformed_book_is_an_error_naming_the_entry_and_field(tmp_path):
    book = tmp_path / "book.json"
    book.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": "dragon", "content": "x"}}}))
    failed_cleanly(run("scan", str(book), "--chat", CHAT), str(book), "'key'")


@pytest.mark.parametrize("args, words", [
    (["scan", BOOK], ["--chat"]),
    (["scan", BOOK, "--chat", "/nonexistent/chat.jsonl"], ["/nonexistent/chat.jsonl", "cannot read"]),
    (["scan", "/nonexistent/book.json", "--chat", CHAT], ["/nonexistent/book.json"]),
    (["explain", BOOK, "--chat", CHAT, "--scan-depth", "-1"], ["--scan-depth", "must be 0 or more"]),
    (["scan", BOOK, "--chat", CHAT, "--scan-depth", "two"], ["--scan-depth", "expected a whole number"]),
    (["scan", BOOK, "--chat", CHAT, "--mode", "kobold"], ["--mode"]),
    (["scan", BOOK, "--chat", CHAT, "--max-context", "-5"], ["--max-context"]),
    (["scan", BOOK, "--chat", CHAT, "--max-context", "0"], ["--max-context", "must be 1 or more"]),
    (["replay", BOOK, "--chat", CHAT, "--depth", "-2"], ["--depth", "must be 0 or more"]),
    (["scan", BOOK, "--chat", CHAT, "--budget-percent", "nan"], ["--budget-percent", "finite"]),
    (["serve", "--port", "0"], ["--port", "must be a TCP port, 1 to 65535"]),
    (["serve", "--time-limit", "0"], ["--time-limit", "must be above 0"]),
    (["summarize", "/tmp", "--top", "0"], ["--top"]),
    (["replay-batch", "--books", BOOK, "--chats", str(EXAMPLES), "--out", "/tmp/x", "--workers", "-1"],
     ["--workers"]),
])
def test_bad_arguments_end_in_a_clear_message_and_a_nonzero_exit(args, words):
    failed_cleanly(run(*args), *words)


def test_bad_settings_files_name_the_file_and_field(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_text('{"scan_dept": 3}')
    failed_cleanly(run("scan", BOOK, "--chat", CHAT, "--settings", str(bad)), str(bad), "'scan_dept'")
    bad.write_text('{"recursive": "yes"}')
    failed_cleanly(run("scan", BOOK, "--chat", CHAT, "--settings", str(bad)), str(bad), "'recursive'")
    bad.write_text("{")
    failed_cleanly(run("scan", BOOK, "--chat", CHAT, "--settings", str(bad)), str(bad), "not JSON")
    failed_cleanly(run("scan", BOOK, "--chat", CHAT, "--settings", str(tmp_path / "none.toml")), "cannot read")


def test_unreadable_files_are_clear_errors(tmp_path):
    # A folder stands in for an unreadable file: a permission test would pass vacuously as root.
    failed_cleanly(run("scan", BOOK, "--chat", str(tmp_path)), str(tmp_path), "cannot read the chat")
    failed_cleanly(run("scan", str(tmp_path), "--chat", CHAT), str(tmp_path), "cannot read")
    failed_cleanly(run("scan", BOOK, "--chat", CHAT, "--settings", str(tmp_path)), str(tmp_path),
                   "cannot read the settings")
    chat = tmp_path / "chat.jsonl"
    chat.write_bytes(b'[{"name": "a", "mes": "\xff"}]')
    failed_cleanly(run("scan", BOOK, "--chat", str(chat)), str(chat), "not UTF-8")


def test_a_closed_pipe_ends_quietly(tmp_path):
    book = st_book(tmp_path, [{"key": [f"k{i}"], "comment": f"entry {i} " * 5} for i in range(3000)])
    proc = subprocess.Popen([sys.executable, "-m", "lorescan", "explain", book, "--chat", CHAT],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline()
    proc.stdout.close()                    # what `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert err == "", err


# -- the README -----------------------------------------------------------------------------
def _readme_section():
    import re
    text = (ROOT / "README.md").read_text()
    section = text.split("## Command line\n", 1)[1].split("\n## ", 1)[0]
    commands = re.search(r"```bash\n(.*?)```", section, re.S).group(1).strip().splitlines()
    shown = re.search(r"```text\n(.*?)```", section, re.S).group(1).rstrip("\n").splitlines()
    return commands, shown


def test_the_readme_command_line_examples_run_and_print_what_the_readme_shows():
    import shlex
    commands, shown = _readme_section()
    assert len(commands) >= 4 and all(c.startswith("lorescan ") for c in commands)
    outputs = []
    for c in commands:
        r = subprocess.run([sys.executable, "-m", "lorescan", *shlex.split(c)[1:]], capture_output=True,
                           text=True, cwd=ROOT)
        assert r.returncode == 0, (c, r.stderr)
        outputs.append(r.stdout.splitlines())
    for line in shown:
        assert line in outputs[2], line


def test_name_macros_are_case_insensitive_and_include_the_legacy_forms(tmp_path):
    # (keys: the engine substitutes only keys that contain "{{", so the legacy forms work in contents)
    book = st_book(tmp_path, [{"key": ["{{USER}}'s map"], "content": "{{CHAR}} and <bot> see <User>."},
                              {"key": ["{{char}}"], "content": "{{unknown}} stays"}])
    chat = chat_file(tmp_path, ["Rowan's map is wet."], meta=False)
    data = json.loads(run("scan", book, "--chat", chat, "--json", "--user", "Rowan", "--character", "Ida").stdout)
    assert data["result"]["world_info_before"] == "Ida and Ida see Rowan."
    assert [d["reason"] for d in data["entries"]] == ["key", "no_key_match"]
    data = json.loads(run("scan", book, "--chat", chat, "--json").stdout)
    assert data["character"] is None and data["user"] is None
    assert [d["reason"] for d in data["entries"]] == ["no_key_match", "no_key_match"], \
        "without names the macros stay as written"


# -- traps (issue 23) ----------------------------------------------------------------------
def test_a_chat_given_as_the_book_says_so_and_names_the_flag():
    r = run("scan", CHAT, "--chat", CHAT)
    failed_cleanly(r, CHAT, "looks like a chat (4 messages), not a lorebook", "--chat")
    assert "Extra data" not in r.stderr.split("(the book's reader said")[0]


def test_a_book_given_as_the_chat_says_so():
    failed_cleanly(run("explain", BOOK, "--chat", BOOK), BOOK, "looks like a lorebook (9 entries), not a chat")
    failed_cleanly(run("replay", BOOK, "--chat", BOOK), "looks like a lorebook")


def test_a_chat_in_the_books_of_lint_and_replay_batch_gets_the_hint(tmp_path):
    r = run_subprocess("lint", CHAT)
    assert r.returncode == 2 and "looks like a chat" in r.stderr, r.stderr
    r = run_subprocess("replay-batch", "--books", CHAT, "--chats", str(EXAMPLES), "--out", str(tmp_path / "o"))
    failed_cleanly(r, "looks like a chat", "--chats")


def test_compile_writes_an_lsc_every_book_command_reads_and_refuses_to_overwrite(tmp_path):
    lsc = tmp_path / "saltmere.lsc"
    assert run_subprocess("compile", BOOK, "-o", str(lsc)).returncode == 0
    before = lsc.read_bytes()
    failed_cleanly(run_subprocess("compile", BOOK, "-o", str(lsc)), str(lsc), "--force")
    assert lsc.read_bytes() == before
    assert run_subprocess("compile", BOOK, "-o", str(lsc), "--force").returncode == 0
    plain = json.loads(run_subprocess("explain", BOOK, "--chat", CHAT, "--json").stdout)
    for args in (["explain", str(lsc), "--chat", CHAT, "--json"],
                 ["explain", str(lsc), "--chat", CHAT, "--json", "--case-sensitive"]):   # other options: recompiled
        r = run_subprocess(*args)
        assert r.returncode == 0, r.stderr
        data = json.loads(r.stdout)
        want = plain if "--case-sensitive" not in args else json.loads(
            run_subprocess("explain", BOOK, "--chat", CHAT, "--json", "--case-sensitive").stdout)
        assert data["result"] == want["result"]
        assert [e["name"] for e in data["entries"]] == [e["name"] for e in want["entries"]]
    r = run_subprocess("replay", str(lsc), "--chat", CHAT)
    assert r.returncode == 0 and r.stdout == run_subprocess("replay", BOOK, "--chat", CHAT).stdout, r.stderr
    assert run_subprocess("lint", str(lsc)).stdout.replace(str(lsc), "B") == \
        run_subprocess("lint", BOOK).stdout.replace(BOOK, "B")


def test_a_bad_flag_is_reported_against_the_subcommands_usage():
    r = run("scan", BOOK, "--chat", CHAT, "--bogus")
    assert r.returncode == 2
    assert r.stderr.startswith("usage: lorescan scan ") and "unrecognized arguments: --bogus" in r.stderr
    assert "{conformance,convert" not in r.stderr
    r = run("replay-batch", "--books", BOOK, "--chats", CHAT, "--out", "/tmp/x", "--nope")
    assert r.stderr.startswith("usage: lorescan replay-batch ") and "--nope" in r.stderr


def test_every_command_has_a_description_and_shows_its_defaults():
    from lorescan.app.cli import _build_parser
    sub = next(a for a in _build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        if name == "convert":              # its own parser, run by `lorescan convert`
            r = run_subprocess("convert", "--help")
            assert r.returncode == 0 and "Convert a lorebook" in r.stdout
            continue
        assert parser.description, name
        text = " ".join(run_subprocess(name, "--help", env={"COLUMNS": "400"}).stdout.split())
        assert parser.description.split()[0] in text, name
        for action in parser._actions:
            if action.option_strings and action.default not in (None, False, [], "", argparse.SUPPRESS) \
                    and action.dest not in ("help", "_parser"):
                assert f"(default: {action.default})" in text or "default" in (action.help or ""), \
                    (name, action.dest)
    serve = " ".join(run_subprocess("serve", "--help").stdout.split())
    assert "default 8000)" in serve and "default 127.0.0.1)" in serve    # serve: "($LORESCAN_SERVE_PORT; default 8000)"
