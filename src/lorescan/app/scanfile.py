"""``lorescan scan`` and ``lorescan explain``: run one generation over a chat and say what
fired and why (``explain``: every entry, with near-misses, as a table).

Inputs come from :mod:`lorescan.app.inputs`, near-misses from :mod:`lorescan.app.nearmiss`,
layout from :mod:`lorescan.app.render`; this module only joins them.
"""
from __future__ import annotations

import argparse
import functools
import json
import re
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import SettingsError
from ..match.options import MatchOptions
from ..model import Entry
from ..st import Diagnostic, EntryId, STEngine, STResult
from ..st.result import describe_span, message_name
from .chats import ChatFile
from .inputs import BOOK_FIELD_OF, Inputs, read_inputs
from .nearmiss import ChatTexts, near_misses, plain_keys_of, plural, show_key
from .render import Style, one_line, table

if TYPE_CHECKING:
    from ..slot.engine import SlotResult

__all__ = ["scan_command", "explain_command", "scan_files"]

_ENTRY_KEY = re.compile(r"'([^'\n]+\.[^'.\n]+)'")
_MESSAGE_LABEL = re.compile(r"message (\d+) \(newest = 0\)")


def _name(e: Entry) -> str:
    return e.comment or (e.key[0] if e.key else "") or f"entry {e.uid}"


class _Report:
    """One run of the engine over the inputs, and the words to describe it."""

    def __init__(self, inputs: Inputs) -> None:
        if inputs.chat is None:       # read_inputs(chat=True) always reads one; replay-batch never gets here
            raise SettingsError("no chat: give one with --chat CHAT", source="command line", field="--chat")
        self.inputs = inputs
        self.chat: ChatFile = inputs.chat
        self.entries: dict[EntryId, Entry] = {}
        for b in inputs.books:
            for e in b.book.entries:
                self.entries.setdefault(EntryId(b.book.name, e.uid), e)
        self.substitute = inputs.substitute()
        self.slot: SlotResult | None = None
        self.st: STResult | None = None
        self.options: MatchOptions | None = None
        if inputs.mode == "slot":
            from ..slot.engine import SlotEngine  # import-cost: slot mode loads only when asked for
            from ..slot.spans import with_spans  # import-cost: slot mode loads only when asked for
            engine = SlotEngine([b.book for b in inputs.books], substitute=self.substitute)
            chat = self.chat
            self.slot_messages = list(zip(chat.roles, (m.text for m in chat.messages)))
            # a command's report explains: the spans are found again after the run (docs/slot-mode.md#slot-spans)
            self.slot = with_spans(engine, self.slot_messages,
                                   engine.run(self.slot_messages, turn_id=inputs.turn_id()))
        else:
            engine_st = STEngine(inputs.sources(), inputs.settings, compat=inputs.compat,
                                 substitute=self.substitute, random=inputs.random())
            self.options = engine_st.match_options
            self.st = engine_st.scan(list(self.chat.messages), max_context=inputs.max_context,
                                     character=inputs.character)

    @functools.cached_property
    def view(self) -> ChatTexts:
        """The chat for near-misses, with every plain key of an entry that missed looked
        up in one pass."""
        view = ChatTexts(self.chat, self.inputs.settings.include_names)
        if self.st is not None:
            view.prepare(k for eid, d in self.st.diagnostics.items() if d.reason == "no_key_match"
                         and eid in self.entries for k in plain_keys_of(self.entries[eid], self.substitute))
        return view

    # -- words ---------------------------------------------------------------------------
    def label(self, eid: EntryId) -> str:
        e = self.entries.get(eid)
        many = len(self.inputs.books) > 1
        head = f"{eid.world} #{eid.uid}" if many else f"#{eid.uid}"
        return f"{head} {_name(e)}" if e is not None else head

    def where(self, label: str | None) -> str | None:
        if label is None:
            return None
        m = _MESSAGE_LABEL.fullmatch(label)
        if m is None:
            return label
        i = int(m.group(1))
        chat = self.chat
        return message_name(chat.numbers[len(chat.messages) - 1 - i], i)

    def text_name(self, kind: str, index: int, label: str) -> str:
        """A scanned text in the chat file's own numbering (``message 3, the newest``;
        docs/sillytavern-mode.md#cli-turns)."""
        if kind != "message" or label == "no message":
            return label
        chat = self.chat
        if self.slot is not None:       # slot mode numbers the scanned (non-system) messages
            from ..slot.spans import message_number  # import-cost: slot mode loads only when asked for
            at = message_number(self.slot_messages, index)
            if at is None:
                return label
            return message_name(chat.numbers[at], index)
        return message_name(chat.numbers[len(chat.messages) - 1 - index], index)

    def span_json(self, d: Diagnostic) -> dict[str, Any] | None:
        """:meth:`KeySpan.to_json` plus ``text`` and ``end_text``: the texts named as :meth:`text_name` does."""
        span = d.span
        if span is None:
            return None
        out = span.to_json()
        out["text"] = self.text_name(span.kind, span.index, span.label)
        out["end_text"] = None if span.end_kind is None or span.end_index is None or span.end_label is None \
            else self.text_name(span.end_kind, span.end_index, span.end_label)
        return out

    def slot_json(self, rec: Any) -> dict[str, Any]:
        """A slot log record as JSON, its span with ``text``/``end_text`` as :meth:`span_json` writes them."""
        data = rec.to_dict()
        if rec.span is not None:
            data["span"]["text"] = self.text_name(rec.span.kind, rec.span.index, rec.span.label)
            data["span"]["end_text"] = None
        return data

    def slot_why(self, rec: Any) -> str:
        """A slot record's reason, keys as written, with the span when a key matched."""
        why = _slot_reason(rec)
        if rec.span is not None and rec.matched_key is not None:
            head = f"key {show_key(rec.matched_key)} matched"
            at = len(head) if why.startswith(head) else len(why)       # the span right after the key's words
            where = describe_span(rec.span, name_text=self.text_name, name_entry=self._slot_entry_name)
            why = why[:at] + " " + where + why[at:]
        return why

    def _slot_entry_name(self, key: str) -> str:
        assert self.slot is not None
        for rec in self.slot.log:
            if f"{rec.book}.{rec.id}" == key:
                return f"#{rec.id} {rec.name}"
        return key

    def entry_name(self, key: str) -> str:
        """An entry named by SillyTavern's ``"<book>.<uid>"`` key, as the tables label it."""
        for eid in self.entries:
            if eid.key == key:
                return self.label(eid)
        return key

    def why(self, d: Diagnostic) -> str:
        """One line on a diagnostic, keys shown as written (no Python reprs)."""
        loop = f" (loop {d.loop})" if d.loop is not None and d.outcome == "activated" else ""
        if d.outcome == "activated" and d.reason == "key" and d.key is not None:
            where = self.where(d.where)
            if d.span is not None:
                place = " " + describe_span(d.span, name_text=self.text_name, name_entry=self.entry_name)
            else:
                place = f" in {where}" if where else ""
            shown = show_key(d.key)
            if self.substitute is not None and self.substitute(d.key) != d.key:
                shown += f" (= {show_key(self.substitute(d.key))})"
            return f"key {shown} matched{place}{loop}"
        if d.reason == "secondary_keys" and d.key is not None:
            return f"key {show_key(d.key)} matched, but the secondary keys failed: {d.detail}"
        detail = _ENTRY_KEY.sub(self._entry_ref, d.detail) if d.detail else d.reason.replace("_", " ")
        return detail + loop

    def _entry_ref(self, m: "re.Match[str]") -> str:
        # the engine names other entries by SillyTavern's "book.uid" key: show the entry instead
        for eid in self.entries:
            if eid.key == m.group(1):
                return self.label(eid)
        return m.group(0)

    def near(self, eid: EntryId, d: Diagnostic, view: ChatTexts | None) -> list[Any]:
        e = self.entries.get(eid)
        if e is None or view is None or self.options is None:
            return []
        return near_misses(e, d, view, self.inputs.settings, self.options, self.substitute)

    # -- header --------------------------------------------------------------------------
    def header(self, out: TextIO, style: Style) -> None:
        i = self.inputs
        for b in i.books:
            how = {"prefix": "", "--book-source": " (--book-source)", "card": " (a character card)",
                   "default": ""}[b.role_from]
            print(style(one_line(b.book.name, 60), "bold") + f": {plural(len(b.book.entries), 'entry', 'entries')}, "
                  f"{b.role}{how}, {one_line(b.path)}", file=out)
        chat = self.chat
        scanned = len(chat.messages)
        extra = f" ({scanned} scanned)" if scanned != chat.total else ""
        who = []
        if i.character is not None:
            who.append(f"character {one_line(i.character.name, 40)} ({i.character_from})")
        if i.user is not None:
            who.append(f"user {one_line(i.user, 40)} ({i.user_from})")
        print(f"Chat: {one_line(chat.path)}, {plural(chat.total, 'message')}{extra}"
              + ("; " + "; ".join(who) if who else ""), file=out)
        if i.mode == "slot":
            assert self.slot is not None
            print(f"Mode: slot, seed {i.seed}, budget {self.slot.budget} tokens, "
                  f"{plural(self.slot.tokens_used, 'token')} used", file=out)
            return
        assert self.st is not None
        print(f"Mode: sillytavern, compat {i.compat}, seed {i.seed}, budget {self.st.budget} tokens "
              f"(max context {i.max_context})", file=out)
        s = i.settings
        changed = [f"{k} {json.dumps(getattr(s, k))} ({src})" for k, src in i.setting_sources.items()
                   if src != "default"]
        if i.setting_sources["scan_depth"] == "default":
            changed.insert(0, f"scan_depth {s.scan_depth} (default)")
        print("Settings: " + ", ".join(changed) + "; the rest default", file=out)
        for k, book, v in i.overridden:
            print(f"  book {book!r} sets {BOOK_FIELD_OF[k]} {json.dumps(v)}, overridden by {i.setting_sources[k]}",
                  file=out)
        for note in i.notes:
            print(f"  {note}", file=out)

    # -- JSON ----------------------------------------------------------------------------
    def to_json(self, *, near: bool) -> dict[str, Any]:
        i = self.inputs
        data: dict[str, Any] = {
            "mode": i.mode, "compat": i.compat, "seed": i.seed, "max_context": i.max_context,
            "books": [{"path": b.path, "name": b.book.name, "source": b.role, "source_from": b.role_from,
                       "entries": len(b.book.entries)} for b in i.books],
            "chat": {"path": self.chat.path, "messages": self.chat.total, "scanned": len(self.chat.messages)},
            "character": None if i.character is None else {
                "name": i.character.name, "filter_id": i.character.filter_id,
                "tags": list(i.character.tags) if i.character.tags is not None else None, "from": i.character_from},
            "user": None if i.user is None else {"name": i.user, "from": i.user_from},
            "settings": {k: {"value": getattr(i.settings, k), "from": src} for k, src in i.setting_sources.items()},
            "book_settings_overridden": [{"setting": k, "book": b, "book_value": v, "by": i.setting_sources[k]}
                                         for k, b, v in i.overridden],
        }
        if self.slot is not None:
            r = self.slot
            data["result"] = {"messages": [{"role": m.role, "content": m.content} for m in r.messages],
                              "budget": r.budget, "tokens_used": r.tokens_used, "passes": r.passes,
                              "budget_book": r.budget_book, "state": r.state,
                              "notes": [{"code": n.code, "text": n.text, "message": n.message} for n in r.notes]}
            data["entries"] = [self.slot_json(rec) for rec in r.log]
            return data
        assert self.st is not None
        data["result"] = self.st.to_json()
        data["result"]["budget"] = self.st.budget
        data["result"]["regex_cutoffs"] = list(self.st.regex_cutoffs)
        data["result"]["fuzzy_cutoffs"] = list(self.st.fuzzy_cutoffs)
        data["result"]["key_hit_cutoffs"] = list(self.st.key_hit_cutoffs)
        view = self.view if near else None
        rows = []
        for eid, d in self.st.diagnostics.items():
            e = self.entries.get(eid)
            row: dict[str, Any] = {"world": eid.world, "uid": eid.uid, "name": _name(e) if e else None, "outcome": d.outcome,
                   "reason": d.reason, "detail": d.detail, "loop": d.loop, "key": d.key, "where": self.where(d.where),
                   "span": self.span_json(d), "text": self.why(d)}
            if near:
                row["near_misses"] = [n.to_json() for n in self.near(eid, d, view)]
            rows.append(row)
        data["entries"] = rows
        return data


def _write_json(data: Any, out: TextIO) -> None:
    json.dump(data, out, ensure_ascii=False, indent=2, default=str)
    out.write("\n")


def scan_command(args: argparse.Namespace, *, out: TextIO) -> int:
    """``lorescan scan``: what fires, why, and where it lands in the prompt."""
    if args.mode == "janitor":
        from .janitorscan import janitor_scan_command  # import-cost: janitor mode loads only when asked for
        return janitor_scan_command(args, out=out)
    report = _Report(read_inputs(args))
    if args.json:
        _write_json(report.to_json(near=False), out)
        return 0
    style = Style.for_stream(out, args.color)
    report.header(out, style)
    if report.slot is not None:
        return _scan_slot(report, style, out, args.why)
    r = report.st
    assert r is not None
    diags = r.diagnostics
    print(style(f"\nActivated ({len(r.activated)}):", "bold"), file=out)
    for eid in r.activated:
        print(f"  {style(one_line(report.label(eid), 60), 'green')}: {one_line(report.why(diags[eid]))}", file=out)
    if args.why:
        print(style("\nNot activated:", "bold"), file=out)
        for eid, d in diags.items():
            if d.outcome != "activated":
                print(f"  {one_line(report.label(eid), 60)}: {d.reason}: {one_line(report.why(d))}", file=out)
    p = r.placement
    print(style("\nPrompt placement:", "bold"), file=out)
    for label, text in (("before character", p.before), ("after character", p.after)):
        if text:
            print(f"  {label}:\n" + "\n".join("    " + line for line in text.split("\n")), file=out)
    for g in p.depth:
        print(f"  @depth {g.depth} (role {g.role}):", file=out)
        for c in g.entries:
            print("\n".join("    " + line for line in c.split("\n")), file=out)
    if r.budget_overflowed:
        print("\nThe token budget was reached; lower-priority entries were left out "
              "(lorescan explain says which).", file=out)
    for line in (*r.regex_cutoffs, *r.fuzzy_cutoffs, *r.key_hit_cutoffs):
        print(f"note: {line}", file=out)
    return 0


def _scan_slot(report: _Report, style: Style, out: TextIO, why: bool) -> int:
    r = report.slot
    assert r is not None
    inserted = [rec for rec in r.log if rec.outcome == "inserted"]
    print(style(f"\nInserted ({len(inserted)}):", "bold"), file=out)
    for rec in r.log:
        if rec.outcome == "inserted" or why:
            print(f"  {rec.book} #{rec.id} {one_line(rec.name, 60)}: {rec.outcome}: {one_line(report.slot_why(rec))}",
                  file=out)
    print(style("\nLorebook slot:", "bold"), file=out)
    for m in r.messages:
        print(f"  [{m.role}]\n" + "\n".join("    " + line for line in m.content.split("\n")), file=out)
    for n in r.notes:
        print(f"note: {one_line(n.text)}", file=out)
    return 0


def _slot_reason(rec: Any) -> str:
    # the slot log quotes the key with repr(); show it as written instead
    if rec.matched_key:
        return rec.reason.replace(repr(rec.matched_key), show_key(rec.matched_key))
    return rec.reason


def _select(report: _Report, wanted: str | None) -> list[EntryId]:
    ids = list(report.st.diagnostics) if report.st is not None else []
    if wanted is None:
        return ids
    w = wanted.strip()
    book, dot, uid = w.rpartition(".")
    picked = [eid for eid in ids if str(eid.uid) == w or (dot and eid.world == book and str(eid.uid) == uid)
              or (report.entries.get(eid) is not None and _name(report.entries[eid]).casefold() == w.casefold())]
    if not picked:          # then a part of a name
        picked = [eid for eid in ids if report.entries.get(eid) is not None
                  and w.casefold() in _name(report.entries[eid]).casefold()]
    if not picked:
        raise SettingsError(f"no entry has the uid or name {wanted!r}", source="command line", field="--entry")
    return picked


def explain_command(args: argparse.Namespace, *, out: TextIO) -> int:
    """``lorescan explain``: every entry (or ``--entry``), why it fired or not, with near-misses."""
    if args.mode == "janitor":
        from .janitorscan import janitor_explain_command  # import-cost: janitor mode loads only when asked for
        return janitor_explain_command(args, out=out)
    report = _Report(read_inputs(args))
    if report.slot is not None:
        return _explain_slot(report, args, out)
    r = report.st
    assert r is not None
    chosen = _select(report, args.entry)
    view = report.view
    if args.json:
        data = report.to_json(near=True)
        keep = {(eid.world, eid.uid) for eid in chosen}
        data["entries"] = [row for row in data["entries"] if (row["world"], row["uid"]) in keep]
        _write_json(data, out)
        return 0
    style = Style.for_stream(out, args.color)
    report.header(out, style)
    print(file=out)
    rows = []
    diags = r.diagnostics
    for eid in chosen:
        d = diags[eid]
        fired = d.outcome == "activated"
        result = "fired" if fired else d.reason.replace("_", " ")
        extra = [n.text for n in report.near(eid, d, view)]
        rows.append((report.label(eid), result, "green" if fired else "red", report.why(d), extra))
    table(rows, style, out)
    n_fired = sum(1 for eid in chosen if diags[eid].outcome == "activated")
    print(f"\n{plural(n_fired, 'entry', 'entries')} of {len(chosen)} fired", file=out)
    return 0


def _explain_slot(report: _Report, args: argparse.Namespace, out: TextIO) -> int:
    r = report.slot
    assert r is not None
    log = list(r.log)
    if args.entry is not None:
        w = args.entry.strip()
        log = [rec for rec in log if str(rec.id) == w or f"{rec.book}.{rec.id}" == w
               or rec.name.casefold() == w.casefold()]
        if not log:
            raise SettingsError(f"no entry has the id or name {args.entry!r}", source="command line",
                                field="--entry")
    if args.json:
        data = report.to_json(near=False)
        data["entries"] = [report.slot_json(rec) for rec in log]
        _write_json(data, out)
        return 0
    style = Style.for_stream(out, args.color)
    report.header(out, style)
    print(file=out)
    rows: list[tuple[str, str, str, str, list[str]]] = []
    many = len(report.inputs.books) > 1
    for rec in log:
        ok = rec.outcome == "inserted"
        rows.append(((f"{rec.book} " if many else "") + f"#{rec.id} {rec.name}", rec.outcome,
                     "green" if ok else "red", report.slot_why(rec),
                     [str(rec.detail).replace("_", " ")] if rec.detail else []))
    table(rows, style, out)
    n = sum(1 for rec in log if rec.outcome == "inserted")
    print(f"\n{plural(n, 'entry', 'entries')} of {len(log)} inserted", file=out)
    return 0


# The old name, for callers of the one-book command.
scan_files = scan_command
