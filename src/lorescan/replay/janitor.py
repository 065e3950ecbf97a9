"""JanitorAI mode of ``lorescan replay`` and ``replay-batch``: one run of the script per turn.

Every turn (:func:`lorescan.replay.turns.turn_points`) is one independent run of
:class:`~lorescan.janitor.JanitorEngine` (the script keeps no state between generations),
with the context JanitorAI builds before the character's reply: ``chat.last_messages`` is
the chat so far (``is_bot`` set for the character's messages, ``message`` the text),
``message_count`` its length, and ``character.name`` the character's name (``--character``,
else the chat's, else the name on its first character message). ``Math.random`` reads
``random.Random(roll_seed(seed, chat, turn))``, the rule of every mode. An entry *fires*
when the script applies it (selected, or by the post-shift pass); ``cut`` is an entry
APPLY_LIMIT cut.

Settings: ``apply_limit`` and ``window_depth`` (JSON values, as the script would hold
them; default: the book's declared knobs, else the script's 6 and 5) and ``compat``
(``"improved"`` runs the improved profile).
"""
from __future__ import annotations

import random
from typing import Any, Mapping, Sequence

from ..errors import SettingsError
from ..formats.janitor import janitor_source
from ..janitor import JanitorEngine, JanitorResult
from ..janitor.engine import DEFAULT_APPLY_LIMIT, DEFAULT_WINDOW_DEPTH
from ..model import Lorebook

__all__ = ["SETTINGS", "check_janitor_settings", "janitor_engine", "janitor_context", "character_name",
           "run_turn", "applied", "entry_names"]

SETTINGS = ("apply_limit", "window_depth", "compat")


def check_janitor_settings(books: Sequence[Lorebook] | None, settings: Mapping[str, Any]) -> None:
    """Raise :class:`SettingsError` for settings or books janitor mode does not take."""
    for k in settings:
        if k not in SETTINGS:
            raise SettingsError(f"janitor mode takes {', '.join(SETTINGS)}, not {k!r}", source="settings", field=k)
    if settings.get("compat", "script") not in ("script", "improved"):
        raise SettingsError("must be 'script' or 'improved'", source="settings", field="compat")
    if books is not None and len(books) != 1:
        raise SettingsError(f"janitor mode runs exactly one book, got {len(books)}", source="replay", field="books")


def janitor_engine(book: Lorebook, settings: Mapping[str, Any]) -> JanitorEngine:
    """The engine for ``book`` (its ``dynamicLore`` value as :func:`janitor_source` gives it),
    the knobs of ``settings`` over the book's own over the script's defaults."""
    source = janitor_source(book)
    knobs = {"apply_limit": DEFAULT_APPLY_LIMIT, "window_depth": DEFAULT_WINDOW_DEPTH, **source.knobs()}
    knobs.update({k: settings[k] for k in ("apply_limit", "window_depth") if k in settings})
    return JanitorEngine(source.entries, profile="improved" if settings.get("compat") == "improved" else "script",
                         **knobs)


def character_name(given: str | None, messages: Sequence[Any]) -> str | None:
    """``given``, else the name on the first character (non-user) message, else None."""
    if given is not None:
        return given
    return next((m.name for m in messages if not m.is_user and m.name), None)


def janitor_context(messages: Sequence[Any], name: str | None) -> dict[str, Any]:
    """The script's ``context`` before a reply to ``messages`` (``.text``, ``.is_user``)."""
    character: dict[str, Any] = {"personality": "", "scenario": ""}
    if name is not None:
        character["name"] = name
    return {"character": character,
            "chat": {"last_messages": [{"is_bot": not m.is_user, "message": m.text} for m in messages],
                     "message_count": len(messages)}}


def run_turn(engine: JanitorEngine, messages: Sequence[Any], name: str | None, seed: int) -> JanitorResult:
    """One turn: the script over ``messages`` with ``Math.random`` from ``Random(seed)``."""
    return engine.run(janitor_context(messages, name), random=random.Random(seed).random)


def applied(result: JanitorResult) -> list[int]:
    """The entries the run applied, in output order (selected, then post-shift)."""
    return [*(result.trace.get("selected") or ()), *(result.trace.get("post_shift") or ())]


def entry_names(engine: JanitorEngine) -> list[str]:
    """A display name per entry: its ``name`` or ``title``, else its first keyword, else ``entry[i]``."""
    out = []
    for i, e in enumerate(engine.entries):
        raw = e.raw
        name = ""
        if isinstance(raw, Mapping):
            for k in ("name", "title"):
                if isinstance(raw.get(k), str) and raw[k].strip():
                    name = raw[k].strip()
                    break
            else:
                kw = raw.get("keywords")
                if isinstance(kw, list) and kw and isinstance(kw[0], str) and kw[0].strip():
                    name = kw[0].strip()
        out.append(name or f"entry[{i}]")
    return out
