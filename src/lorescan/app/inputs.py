"""The inputs of one generation, from the command line: books with their roles, the chat,
the character and the user, every setting with where its value came from, the mode, the
seed. One place, so every command that runs the engine (``scan``, ``explain``, ``replay``,
``replay-batch``) takes the same arguments: :func:`add_input_arguments` (or, for
``replay-batch``, :func:`add_setting_arguments`) on the parser, :func:`read_inputs` on the
parsed arguments; :func:`roll_seed` is the one rule for random values.

Settings, lowest precedence first: STSettings' defaults, the books' own settings (a card's
``scan_depth``, ``token_budget`` -> ``budget_cap``, ``recursive_scanning`` -> ``recursive``;
``--ignore-book-settings`` drops them), ``--settings FILE`` (which may also give
``max_context`` and ``compat``), then the flags.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random as _random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, cast

from ..errors import SettingsError
from ..macros import name_macros
from ..model import Lorebook
from ..st.settings import STSettings
from .argtypes import count, non_negative_float, positive_int

if TYPE_CHECKING:        # the engine loads when a command runs, not when the parser is built
    from ..st.compiled import CompiledBook
    from ..st.result import Role
    from ..st import BookSource, Character
    from .chats import ChatFile

__all__ = ["Inputs", "BookInput", "add_input_arguments", "read_inputs", "ROLE_PREFIXES", "make_substitute",
           "BOOK_FIELD_OF", "load_book", "is_compiled_file", "add_setting_arguments", "roll_seed", "chat_key",
           "BOOKS_HELP"]

ROLE_PREFIXES = ("global", "character", "persona", "chat")
_COMPATS = ("sillytavern", "improved")
_MAX_CONTEXT = 8192
# What a --settings file may hold besides STSettings' names (as replay-batch has always read it).
_RUN_SETTINGS = ("max_context", "compat")
_CARD_FORMATS = ("ccv2", "ccv3", "character_book", "png", "charx")
_SETTING_HELP = {
    "scan_depth": "newest messages scanned",
    "budget_percent": "budget as a percent of --max-context",
    "budget_cap": "budget cap in tokens, 0 for none",
    "min_activations": "keep scanning deeper until this many entries fired, 0 for off",
    "min_activations_depth_max": "deepest scan for min activations, 0 for the whole chat",
    "max_recursion_steps": "at most this many scan loops, 0 for no limit",
    "recursive": "activated contents are scanned for more keys",
    "case_sensitive": "keys match case-sensitively (entries may override)",
    "match_whole_words": "keys match whole words only (entries may override)",
    "use_group_scoring": "inclusion groups keep only their best-scoring members",
    "include_names": "scan messages as 'Name: text'",
    "insertion_strategy": "order of character and global books",
    "overflow_alert": "report a budget overflow",
    "stable_placement": "cache-stable placement: entries keep their place across turns (improved profile)",
}
# A book's own settings and the STSettings field each one sets in SillyTavern mode.
_BOOK_SETTINGS = (("scan_depth", "scan_depth"), ("token_budget", "budget_cap"), ("recursive_scanning", "recursive"))
BOOK_FIELD_OF = {st: book for book, st in _BOOK_SETTINGS}
# Old spellings kept working.
_ALIASES = {"scan_depth": ["--depth"], "match_whole_words": ["--whole-words"]}


@dataclass(frozen=True, slots=True)
class BookInput:
    path: str
    role: str
    book: Lorebook
    role_from: str            # "prefix", "--book-source", "card" or "default"
    compiled: CompiledBook | None = None      # the book came from a .lsc file (lorescan compile)


_LSC_MAGIC = b"LORESCN\x00"


def is_compiled_file(path: str) -> bool:
    """Whether ``path`` starts like a ``.lsc`` file (``lorescan compile``), whatever its name."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(_LSC_MAGIC)) == _LSC_MAGIC
    except OSError:
        return False


def load_book(path: str, *, chat_flag: str = "--chat") -> tuple[Lorebook, CompiledBook | None]:
    """The book in ``path`` (any supported format, or a ``.lsc`` file, whose source book it
    returns with the compiled form). A file that is not a book but reads as a chat raises a
    :class:`FormatError` saying so and naming ``chat_flag``, the flag chats go to."""
    from ..errors import FormatError  # import-cost: the readers load when a command runs
    from ..formats import load  # import-cost: as above
    if is_compiled_file(path):
        from ..st.compiled import load_compiled  # import-cost: as above
        try:
            compiled = load_compiled(path)
        except OSError as exc:
            raise FormatError(f"cannot read: {exc.strerror or exc}", source=path) from exc
        return compiled.book, compiled
    try:
        return load(path), None
    except FormatError as exc:
        n = _chat_messages(path)
        if n is None:
            raise
        raise FormatError(f"this looks like a chat ({n} message{'s' if n != 1 else ''}), not a lorebook: give "
                          f"chats with {chat_flag} and lorebooks as BOOK (the book's reader said: {exc.problem})",
                          source=path) from exc


def _chat_messages(path: str) -> int | None:
    """How many messages ``path`` holds if it reads as a chat, else None."""
    from ..errors import LorebookError  # import-cost: as above
    from .chats import read_chat  # import-cost: as above
    try:
        return read_chat(path, hint=False).total
    except LorebookError:
        return None


@dataclass(frozen=True)
class Inputs:
    """Everything one generation needs, read and checked. ``setting_sources`` maps every
    STSettings field to where its value came from (``default``, ``book 'NAME'``,
    ``--settings FILE``, ``--flag``); ``overridden`` lists book settings a file or flag
    replaced, as ``(field, book name, book value)``."""

    mode: str
    compat: str
    books: tuple[BookInput, ...]
    chat: ChatFile | None         # None for replay-batch, which reads many
    settings: STSettings
    setting_sources: Mapping[str, str]
    overridden: tuple[tuple[str, str, Any], ...]
    character: Character | None
    character_from: str | None
    user: str | None
    user_from: str | None
    seed: int
    max_context: int
    notes: tuple[str, ...] = field(default=())

    def sources(self) -> list[BookSource]:
        """The books with their roles; a ``.lsc`` book as compiled when it was compiled with
        the match options these settings use (else its source book, compiled again)."""
        from ..st import BookSource  # import-cost: the engine's modules load when a scan runs
        from ..st.settings import Compat  # import-cost: as above
        options = Compat.of(self.compat).match_options(case_sensitive=self.settings.case_sensitive,
                                                       match_whole_words=self.settings.match_whole_words)
        return [BookSource(b.compiled if b.compiled is not None and b.compiled.options == options else b.book,
                           (cast("Role", b.role),)) for b in self.books]

    def random(self) -> Callable[[], float]:
        """A fresh generator for the rolls of this chat's generation (:func:`roll_seed`)."""
        assert self.chat is not None
        return _random.Random(roll_seed(self.seed, chat_key(self.chat.path), len(self.chat.messages))).random

    def turn_id(self) -> str:
        """Slot mode's turn id for this chat's generation (:func:`roll_seed`)."""
        assert self.chat is not None
        return str(roll_seed(self.seed, chat_key(self.chat.path), len(self.chat.messages)))

    def replay_settings(self) -> dict[str, Any]:
        """The settings as replay and replay-batch take them: STSettings names plus
        ``max_context`` and ``compat`` (SillyTavern mode; none in slot mode)."""
        if self.mode == "slot":
            return {}
        return {**dataclasses.asdict(self.settings), "max_context": self.max_context, "compat": self.compat}

    def substitute(self) -> Callable[[str], str] | None:
        return make_substitute(self.character.name if self.character else None, self.user)


def chat_key(path: str) -> str:
    """What a chat file is known by in :func:`roll_seed`: its name, without folders."""
    return os.path.basename(path)


def roll_seed(seed: int, chat: str, turn: int) -> int:
    """The one rule for random values (docs/sillytavern-mode.md#cli-seed): the generation at
    turn ``turn`` (it scans the chat's first ``turn`` non-system messages) of the chat known as
    ``chat`` (:func:`chat_key`, or the ``id`` of a chat in a JSON-lines file of chats) draws
    its rolls, in the engine's order, from ``random.Random(roll_seed(seed, chat, turn))``;
    in slot mode the turn id is ``str(roll_seed(...))``. ``scan``, ``explain``, ``replay``
    and ``replay-batch`` all follow it."""
    digest = hashlib.sha256(f"{seed}\x00{chat}\x00{turn}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big")


def make_substitute(char: str | None, user: str | None) -> Callable[[str], str] | None:
    """SillyTavern's name macros: ``{{user}}`` and ``<USER>`` become the user's name;
    ``{{char}}``, ``<BOT>``, ``<CHAR>``, and in a one-character chat ``{{group}}``,
    ``{{charIfNotGroup}}``, ``<GROUP>``, ``<CHARIFNOTGROUP>`` the character's; all
    case-insensitive, as in SillyTavern. A name that is not known leaves its macros as they
    are. Other macros are not expanded."""
    table: dict[str, str] = {}
    if user is not None:
        table.update({"{{user}}": user, "<user>": user})
    if char is not None:
        for m in ("{{char}}", "<bot>", "<char>", "{{group}}", "{{charifnotgroup}}", "<group>", "<charifnotgroup>"):
            table[m] = char
    # A MacroTable: every expansion is measured against its key or content limit before it
    # is built (a 600,000-character name in a chat's metadata crashed the automaton).
    return name_macros(table, source="the character and user names")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


BOOKS_HELP = ("lorebook files (any supported format, or a .lsc file from lorescan compile); prefix one with "
              "global:, character:, persona: or chat: to set its source (default: character for a character "
              "card, else global)")


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the book, chat, character, settings, mode and seed arguments to ``parser``
    (``scan``, ``explain``, ``replay``)."""
    parser.add_argument("books", nargs="+", metavar="BOOK", help=BOOKS_HELP)
    parser.add_argument("--chat", metavar="CHAT",
                        help="chat file: SillyTavern .jsonl, a JSON list of {name, mes} or {role, content}, or "
                             '{"messages": [...]}')
    add_setting_arguments(parser)


def add_setting_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every argument but the books and the chat: book sources, character and user,
    mode, compat, context, seed and the SillyTavern settings (``replay-batch`` takes its
    books and chats its own way and these as they are)."""
    parser.add_argument("--book-source", action="append", default=[], metavar="SOURCE",
                        choices=ROLE_PREFIXES,
                        help="source of each BOOK in turn, for books without a prefix (repeat it once per book)")
    g = parser.add_argument_group("character and user")
    g.add_argument("--character", metavar="NAME",
                   help="the character's name (for {{char}} and character filters; default: the chat's metadata)")
    g.add_argument("--tag", action="append", default=None, metavar="TAG",
                   help="a tag of the character (repeatable), for tag filters")
    g.add_argument("--character-id", metavar="ID",
                   help="the character's filter id, its avatar file name without extension (default: NAME)")
    g.add_argument("--user", metavar="NAME", help="the user's name, for {{user}} (default: the chat's metadata)")
    r = parser.add_argument_group("engine")
    r.add_argument("--mode", choices=("sillytavern", "slot", "janitor"), default="sillytavern",
                   help="engine: SillyTavern's World Info, the lorebook-slot platform, or the JanitorAI script "
                        "(a .js script, its JSON or a raw dynamicLore array; --compat improved is its improved "
                        "profile) "
                        "(default: %(default)s)")
    r.add_argument("--apply-limit", metavar="JSON",
                   help="janitor mode: the APPLY_LIMIT knob (default: the script's, else 6)")
    r.add_argument("--window-depth", metavar="JSON",
                   help="janitor mode: the WINDOW_DEPTH knob (default: the script's, else 5)")
    r.add_argument("--compat", choices=_COMPATS, default=None,
                   help="SillyTavern's exact matching rules, or lorescan's improved ones; a --settings file may "
                        "set compat (default: sillytavern)")
    r.add_argument("--max-context", type=positive_int, default=None, metavar="TOKENS",
                   help="context size the budget is a percent of; a --settings file may set max_context "
                        f"(default: {_MAX_CONTEXT})")
    r.add_argument("--seed", type=int, default=0, metavar="N",
                   help="seed of every roll (inclusion groups, probability): a generation's rolls depend on the "
                        "seed, the chat file's name and the turn only, so scan, replay and replay-batch roll "
                        "alike (docs/sillytavern-mode.md#cli-seed) (default: %(default)s)")
    s = parser.add_argument_group("SillyTavern settings (a flag beats --settings, which beats the books' own)")
    s.add_argument("--settings", metavar="FILE", help="STSettings as a JSON or TOML file (names as below, with _; "
                   "also max_context and compat)")
    s.add_argument("--ignore-book-settings", action="store_true",
                   help="do not apply the books' own scan_depth, token_budget and recursive_scanning")
    for f in dataclasses.fields(STSettings):
        shown = f.default if isinstance(f.default, str) else json.dumps(f.default)
        help_text = f"{_SETTING_HELP.get(f.name, f.name)} (default: {shown})"
        names = [_flag(f.name), *_ALIASES.get(f.name, [])]
        if f.type in ("bool", bool):
            s.add_argument(*names, dest=f"set_{f.name}", action=argparse.BooleanOptionalAction, default=None,
                           help=help_text)
        elif f.name == "insertion_strategy":
            s.add_argument(*names, dest=f"set_{f.name}", choices=("evenly", "character_first", "global_first"),
                           default=None, help=help_text)
        else:
            s.add_argument(*names, dest=f"set_{f.name}", type=non_negative_float if f.type in ("float", float)
                           else count, default=None, metavar="N", help=help_text)


def _load_settings_file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(1 << 20)
    except OSError as exc:
        raise SettingsError(f"cannot read the settings: {exc.strerror or exc}", source=path) from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SettingsError("the settings file is not UTF-8", source=path) from exc
    data: Any
    if path.lower().endswith(".toml"):
        try:
            import tomllib  # import-cost: TOML is read only for a TOML file (on 3.10 this is not the stdlib)
        except ModuleNotFoundError:     # Python 3.10: tomli is a dependency there (pyproject.toml)
            import tomli as tomllib  # type: ignore[no-redef]  # import-cost: the 3.10 fallback of the stdlib tomllib
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"not TOML: {exc}", source=path) from exc
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SettingsError(f"not JSON (line {exc.lineno}): {exc.msg}; a .toml file is read as TOML",
                                source=path) from exc
    if not isinstance(data, dict):
        raise SettingsError(f"the settings must be an object, got {type(data).__name__}", source=path)
    known = {f.name for f in dataclasses.fields(STSettings)} | set(_RUN_SETTINGS)
    for k in data:
        if k not in known:
            raise SettingsError(f"unknown setting (known: {', '.join(sorted(known))})", source=path, field=str(k))
    return data


def _split_prefix(arg: str) -> tuple[str | None, str]:
    head, sep, rest = arg.partition(":")
    if sep and head in ROLE_PREFIXES and rest:
        return head, rest
    return None, arg


def _read_books(args: argparse.Namespace, paths: list[str], *, chat_flag: str = "--chat") -> list[BookInput]:
    given = list(args.book_source)
    unprefixed = [p for p in paths if _split_prefix(p)[0] is None]
    if given and len(given) != len(unprefixed):
        raise SettingsError(f"--book-source given {len(given)} time(s) for {len(unprefixed)} book(s) without a "
                            "prefix; give it once per such book, or use prefixes", source="command line",
                            field="--book-source")
    out = []
    for arg in paths:
        role, path = _split_prefix(arg)
        book, compiled = load_book(path, chat_flag=chat_flag)
        if role is not None:
            origin = "prefix"
        elif given:
            role, origin = given.pop(0), "--book-source"
        elif book.format in _CARD_FORMATS:
            role, origin = "character", "card"
        else:
            role, origin = "global", "default"
        out.append(BookInput(path, role, book, origin, compiled))
    return out


def read_inputs(args: argparse.Namespace, *, chat: bool = True) -> Inputs:
    """Load and check everything :func:`add_input_arguments` asked for (``chat=False``: what
    :func:`add_setting_arguments` asked for, and the books of ``args.books``; the result's
    ``chat`` is None). Raises :class:`LorebookError` (a subclass) naming the file, or the
    flag, at fault."""
    from ..st import Character  # import-cost: the engine's modules load when a scan runs
    from .chats import read_chat  # import-cost: as above
    paths = list(args.books)
    chat_file = None
    if chat:
        chat_path = args.chat
        if chat_path is None:
            if len(paths) < 2:
                raise SettingsError("no chat: give one with --chat CHAT", source="command line", field="--chat")
            chat_path = paths.pop()        # the old form: lorescan scan BOOK CHAT
        books = _read_books(args, paths)
        chat_file = read_chat(chat_path)
    else:
        books = _read_books(args, paths, chat_flag="--chats")
    # settings, lowest precedence first
    values: dict[str, Any] = {}
    sources = {f.name: "default" for f in dataclasses.fields(STSettings)}
    book_values: dict[str, tuple[str, Any]] = {}
    notes: list[str] = []
    if args.mode == "sillytavern" and not args.ignore_book_settings:
        for b in books:
            for book_name, st_name in _BOOK_SETTINGS:
                v = b.book.fields.get(book_name)
                if v is None or isinstance(v, bool) != (st_name == "recursive"):
                    continue
                if st_name in book_values:
                    if book_values[st_name][1] != v:
                        notes.append(f"book {b.book.name!r} sets {book_name} {json.dumps(v)}; the first book's "
                                     f"{json.dumps(book_values[st_name][1])} applies")
                    continue
                book_values[st_name] = (b.book.name, v)
                values[st_name] = v
                sources[st_name] = f"{book_name} of book {b.book.name!r}"
    from_file = _load_settings_file(args.settings) if args.settings else {}
    compat, max_context = args.compat, args.max_context
    file_compat, file_context = from_file.pop("compat", None), from_file.pop("max_context", None)
    if file_compat is not None and file_compat not in _COMPATS:
        raise SettingsError(f"must be one of {', '.join(_COMPATS)}, got {file_compat!r:.40}", source=args.settings,
                            field="compat")
    if file_context is not None and (isinstance(file_context, bool) or not isinstance(file_context, int)
                                     or file_context < 1):
        raise SettingsError(f"must be a whole number, 1 or more, got {file_context!r:.40}", source=args.settings,
                            field="max_context")
    compat = compat or file_compat or "sillytavern"
    max_context = max_context if max_context is not None else file_context or _MAX_CONTEXT
    for k, v in from_file.items():
        values[k] = v
        sources[k] = f"--settings {args.settings}"
    flagged = {f.name: getattr(args, f"set_{f.name}") for f in dataclasses.fields(STSettings)
               if getattr(args, f"set_{f.name}", None) is not None}
    for k, v in flagged.items():
        values[k] = v
        sources[k] = _flag(k)
    if args.mode == "slot" and (from_file or flagged):
        raise SettingsError("SillyTavern settings do not apply in slot mode (each book carries its own scan "
                            "depth, budget and recursion)", source="command line",
                            field=_flag(next(iter(flagged))) if flagged else "--settings")
    overridden = tuple((k, name, v) for k, (name, v) in book_values.items() if k in from_file or k in flagged)
    try:
        settings = STSettings(**values)
    except SettingsError as exc:
        origin = sources.get(exc.field or "", "settings")
        hint = " (--ignore-book-settings skips the books' own settings)" if " of book " in origin else ""
        raise SettingsError(exc.problem + hint, source=origin, field=exc.field) from exc
    character = None
    character_from = None
    name = args.character if args.character is not None else chat_file.character_name if chat_file else None
    if name is not None:
        character_from = "--character" if args.character is not None else "the chat's metadata"
        filter_id = args.character_id if args.character_id is not None else name
        character = Character(name, avatar=f"{filter_id}.png", tags=tuple(args.tag) if args.tag else None)
    elif args.tag or args.character_id:
        raise SettingsError("--tag and --character-id need --character", source="command line",
                            field="--character")
    user = args.user if args.user is not None else chat_file.user_name if chat_file else None
    user_from = None if user is None else ("--user" if args.user is not None else "the chat's metadata")
    return Inputs(args.mode, compat, tuple(books), chat_file, settings, sources, overridden, character,
                  character_from, user, user_from, args.seed, max_context, tuple(notes))

