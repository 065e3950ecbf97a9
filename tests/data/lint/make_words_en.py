"""Regenerate src/lorescan/lint/words_en.txt: common English words for lint check LS701.

Frequency comes from the merge order of tiktoken's cl100k_base encoding (shipped with
lorescan, MIT): a BPE vocabulary merges frequent strings first, so the earlier a token
``" word"`` appears, the more common the word. Tokens are fragments as often as words
(``" con"``, ``" substant"``), so a token is kept only when it is a word of the ``web2``
list (Webster's Second International, public domain), as packaged by the ``english-words``
distribution (MIT; only needed to run this script: ``pip install english-words``).

    python tests/data/lint/make_words_en.py > src/lorescan/lint/words_en.txt
"""
from __future__ import annotations

import re
import sys

COUNT = 4000


def main() -> None:
    from english_words import get_english_words_set

    from lorescan.tokens import resolve_offline_encoding
    dictionary = get_english_words_set(["web2"], lower=True, alpha=True)
    ranks = resolve_offline_encoding("cl100k_base")._mergeable_ranks
    words = []
    for token, _rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        m = re.fullmatch(rb" ([a-z]{3,14})", token)
        if m and m.group(1).decode() in dictionary:
            words.append(m.group(1).decode())
        if len(words) == COUNT:
            break
    sys.stdout.write("# Common English words, most frequent first: tests/data/lint/make_words_en.py\n")
    sys.stdout.write("\n".join(words) + "\n")


if __name__ == "__main__":
    main()
