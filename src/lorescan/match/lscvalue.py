"""Small values of a compiled form: a JSON encoding that keeps Python's types and sharing.

:func:`encode_value` turns options, special keys and other small values into plain JSON data
(tuples, frozensets, bytes, dicts with any keys and registered types tagged, a dict or list
met twice stored once); :func:`decode_value` turns it back. Split out of
:mod:`lorescan.match.lsc` (the container), which re-exports every name here;
``lorescan.st.lsc`` extends both classes with the model's types.
"""
from __future__ import annotations

import base64
from typing import Any, Callable

_TAG = "\x00"      # tagged objects are one-key dicts whose key starts with NUL


def encode_value(value: Any) -> Any:
    """``value`` as plain JSON data that :func:`decode_value` turns back into an equal value
    of the same types (tuples, frozensets, bytes, dicts with any keys, registered types),
    with the same sharing: a dict or list met twice is stored once and comes back as one
    object. (``lorescan.st.lsc`` extends it with the model's types.)

    Raises TypeError for a type it does not know.
    """
    return ValueEncoder().run(value)


class ValueEncoder:
    """:func:`encode_value`; a subclass stores more types by handling them in ``run`` first."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[int, Any]] = {}     # id -> (pre-order number, the object)

    def share(self, value: Any) -> Any:
        # None: first time (numbered now); else the reference to store instead.
        got = self.seen.get(id(value))
        if got is not None:
            return {"\x00r": got[0]}
        self.seen[id(value)] = (len(self.seen), value)
        return None

    def run(self, value: Any) -> Any:
        t = type(value)
        if value is None or t is bool or t is int or t is str or t is float:
            return value
        run = self.run
        if t is list:
            ref = self.share(value)
            return ref if ref is not None else [run(v) for v in value]
        if t is tuple:
            return {"\x00t": [run(v) for v in value]}
        if t is dict:
            return self.mapping(value, None)
        if t is frozenset:
            return {"\x00s": [run(v) for v in value]}
        if t is bytes:
            return {"\x00b": base64.b64encode(value).decode("ascii")}
        extra = _VALUE_TYPES.get(t)
        if extra is not None:
            return {"\x00x": [extra[0], run(extra[1](value))]}
        raise TypeError(f"cannot store a {t.__module__}.{t.__qualname__} in a compiled form")

    def mapping(self, value: Any, tag: str | None) -> Any:
        """A mapping's body, shared like a dict; ``tag``: None for a dict, else the tag of the
        mapping type (a decoder builds it from the body with ``ValueDecoder.body``)."""
        ref = self.share(value)
        if ref is not None:
            return ref
        run = self.run
        plain = all(type(k) is str for k in value) and not (
            len(value) == 1 and next(iter(value)).startswith(_TAG))
        if plain:
            body: Any = {k: run(v) for k, v in value.items()}
        else:
            body = {"\x00d": [[run(k), run(v)] for k, v in value.items()]}
        return body if tag is None else {tag: body}


_VALUE_TYPES: dict[type, tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = {}
_VALUE_TAGS: dict[str, Callable[[Any], Any]] = {}


def register_value_type(cls: type, tag: str, encode: Callable[[Any], Any], decode: Callable[[Any], Any]) -> None:
    """Let :func:`encode_value` store instances of ``cls``: ``encode(obj)`` gives a value it
    can already store, ``decode(that)`` the object again; ``tag`` names the type in files
    (never reuse a tag for another meaning). For example, a point type kept in a
    special key: ``register_value_type(Point, "point", lambda p: (p.x, p.y),
    lambda t: Point(*t))``."""
    _VALUE_TYPES[cls] = (tag, encode, decode)
    _VALUE_TAGS[tag] = decode


def decode_value(data: Any) -> Any:
    """The value :func:`encode_value` encoded."""
    return ValueDecoder().run(data)


class ValueDecoder:
    """:func:`decode_value`; a subclass reads more tags in :meth:`tagged`."""

    def __init__(self) -> None:
        self.objects: list[Any] = []          # shared containers by pre-order number

    def reserve(self) -> int:
        self.objects.append(None)
        return len(self.objects) - 1

    def run(self, data: Any) -> Any:
        t = type(data)
        run = self.run
        if t is list:
            out: list[Any] = []
            self.objects.append(out)
            out.extend(run(v) for v in data)
            return out
        if t is not dict:
            return data
        if len(data) == 1:
            (k, v), = data.items()
            if k.startswith(_TAG):
                if k == "\x00t":
                    return tuple(run(x) for x in v)
                if k == "\x00r":
                    return self.objects[v]
                if k == "\x00d":
                    slot = self.reserve()
                    made = self.objects[slot] = {}
                    for a, b in v:
                        made[run(a)] = run(b)
                    return made
                if k == "\x00s":
                    return frozenset(run(x) for x in v)
                if k == "\x00b":
                    return base64.b64decode(v)
                if k == "\x00x":
                    decode = _VALUE_TAGS.get(v[0])
                    if decode is None:
                        raise ValueError(f"unknown stored type {v[0]!r}")
                    return decode(run(v[1]))
                return self.tagged(k, v)
        made_dict: dict[Any, Any] = {}
        self.objects.append(made_dict)
        for key, value in data.items():
            made_dict[key] = run(value)
        return made_dict

    def tagged(self, tag: str, data: Any) -> Any:
        """The value of a tag this decoder does not know (a subclass reads its own)."""
        raise ValueError(f"unknown tag {tag!r}")

    def body(self, data: dict[str, Any]) -> dict[Any, Any]:
        # A tagged mapping's body (ValueEncoder.mapping): numbered with the mapping, not on its own.
        if len(data) == 1 and next(iter(data)) == "\x00d":
            return {self.run(a): self.run(b) for a, b in data["\x00d"]}
        return {key: self.run(value) for key, value in data.items()}
