"""Live differential run of lorescan.js.regex against node (by hand, not part of the suite).

    PYTHONPATH=src python tests/data/jsregex/differential.py [N_PATTERNS] [SEED]

Builds random patterns from a small grammar (literals, classes, groups, quantifiers, anchors,
backreferences, escapes) with random flags, evaluates them in V8 through
``generate.mjs --eval`` and in Python, and prints every disagreement. Fixed disagreements go
into the FUZZ list of generate.mjs so the committed fixture keeps them.
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from lorescan.js.regex import JSRegexError, RegexTimeout
from lorescan.js.regex import _compile_js_regex as compile_js_regex   # new RegExp(pattern, flags)

HERE = Path(__file__).parent
LITERALS = list("abAB_-1 .\n") + ["\x01", "ſ", "K", "\u212a", "é", "😀", "日", "ж", "Ж", "ß", "\\x01", "\\n", "\\u0041",
                                   "\\u{1F600}", "\\cA", "\\0", "\\/", "\\.", "\\-", "{", "}", "]", "\\k", "\\8",
                                   "\\12", "\\01", "\\c1", "\\c", "\\u{", "\\x4", "\\uD83D", "\\uDE00", "\\p", "\\a",
                                   "\\ud83d\\ude00", "σ", "ς", "Σ", "ǅ", "İ", "ı", "i"]
CLASSES = ["\\w", "\\W", "\\d", "\\D", "\\s", "\\S", ".", "[^]", "[]", "[a-c]", "[^a]", "[\\w-]", "[\\d-a]", "[😀]",
           "[^\\s]", "[a-zA-Z]", "\\p{L}", "\\P{Lu}", "[\\b]", "[ſ]", "[k-m]",
           "[\\c1]", "[\\c]", "[\\1]", "[\\8]", "[\\B]", "[\\-a]", "[a-\\w]", "[^\\W]", "[\\p{Ll}]", "[😀-😂]", "\\p{Script=Greek}"]
ASSERTIONS = ["^", "$", "\\b", "\\B", "(?=a)", "(?!b)", "(?<=a)", "(?<!\\w)", "(?<=(a))", "(?=(\\w))", "(?<=\\1a)"]
QUANTS = ["", "", "", "*", "+", "?", "{2}", "{1,2}", "{0,}", "*?", "+?", "{1", "{,2}"]
TEXT_ALPHABET = list("abAB_1 -.\n\r\\") + ["σ", "ς", "Σ", "ǆ", "İ", "ı", "i", "I", "\x11", "\x00", "\x07", "\x01", "ſ", "s", "K", "k", "\u212a", "é", "É", "😀", "\ud83d", "日", "ж", "Ж",
                                        "ß", "\u2028", "{", "}", "]", "/", "u"]


def pattern(rng: random.Random, depth: int = 0) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        if kind < 0.35:
            atom = rng.choice(LITERALS)
        elif kind < 0.6:
            atom = rng.choice(CLASSES)
        elif kind < 0.7:
            parts.append(rng.choice(ASSERTIONS))
            continue
        elif kind < 0.85 and depth < 2:
            inner = pattern(rng, depth + 1)
            if rng.random() < 0.3:
                inner += "|" + pattern(rng, depth + 1)
            atom = rng.choice(["(", "(", "(?:", "(?<n%d>" % rng.randint(0, 2)]) + inner + ")"
        else:
            atom = rng.choice(["\\1", "\\2", "\\k<n0>", "\\k<n1>"])
        parts.append(atom + rng.choice(QUANTS))
    return "".join(parts)


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    cases = []
    for _ in range(count):
        flags = "".join(f for f in "imsuy" if rng.random() < 0.25)
        texts = ["".join(rng.choice(TEXT_ALPHABET) for _ in range(rng.randint(0, 8))) for _ in range(6)]
        cases.append([pattern(rng), flags, texts])
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(json.dumps(cases), "utf-8")
        subprocess.run(["node", str(HERE / "generate.mjs"), "--eval", str(src), str(dst)], check=True)
        results = json.loads(dst.read_text("utf-8"))
    bad = 0
    for case in results:
        p, f = case["pattern"], case["flags"]
        try:
            rx = compile_js_regex(p, f)
        except JSRegexError as exc:
            if not case["throws"]:
                bad += 1
                print("REJECTED, V8 accepts:", json.dumps([p, f]), exc)
            continue
        if case["throws"]:
            bad += 1
            print("ACCEPTED, V8 throws:", json.dumps([p, f]), case["message"])
            continue
        for text, want in zip(case["texts"], case["results"]):
            try:
                got = rx.search(text, timeout=1.0)
            except RegexTimeout:
                got = "timeout"
            except Exception as exc:          # anything else is a bug: report it, keep going
                got = f"{type(exc).__name__}"
            if got != want:
                bad += 1
                print("DIFFERS:", json.dumps([p, f, [text]]), "V8:", want, "ours:", got)
    thrown = sum(c["throws"] for c in results)
    hits = sum(sum(c["results"]) for c in results)
    tests = sum(len(c["results"]) for c in results)
    print(f"{len(results)} patterns ({thrown} throw in V8), {tests} tests ({hits} true), {bad} disagreements")


if __name__ == "__main__":
    main()
