"""The JS client's types (clients/js/lorescan.d.ts) against /openapi.json: the same fields, the same
optional ones, the same JSON types and enum values, nested objects included, so the hand-written
``.d.ts`` cannot drift from the models the server decodes and answers with."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("LORESCAN_REQUIRE_SERVE") != "1":
    pytest.importorskip("msgspec", reason="the serve extra is not installed (pip install '.[serve]')")

from lorescan.serve.openapi import openapi_document  # noqa: E402

DTS = Path(__file__).resolve().parents[2] / "clients" / "js" / "lorescan.d.ts"
# interface in the .d.ts -> schema in components/schemas; nested types are followed from these
ROOTS = {"BookInfo": "BookInfo", "STScanRequest": "STScanRequest", "STScanResponse": "STScanResponse",
         "SlotRunRequest": "SlotRunRequest", "SlotRunResponse": "SlotRunResponse", "ErrorBody": "ErrorBody",
         "JanitorRunRequest": "JanitorRunRequest", "JanitorRunResponse": "JanitorRunResponse"}
_PRIMITIVE = {"string": "string", "number": "number", "boolean": "boolean", "null": "null"}


def split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside brackets and strings."""
    parts, depth, start, quote = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch == '"':
            quote = not quote
        elif quote:
            continue
        elif ch in "{[(<":
            depth += 1
        elif ch in "}])>":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_dts(text: str) -> tuple[dict[str, dict[str, tuple[bool, str]]], dict[str, str]]:
    """(interface name -> member -> (optional, type text), type alias name -> type text)."""
    text = re.sub(r"//[^\n]*", "", text)
    interfaces = {}
    for found in re.finditer(r"export interface (\w+)\s*\{", text):
        depth, i = 1, found.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        interfaces[found.group(1)] = members(text[found.end():i - 1])
    aliases = {m.group(1): m.group(2).strip() for m in re.finditer(r"export type (\w+)\s*=\s*([^;]+);", text)}
    return interfaces, aliases


def members(body: str) -> dict[str, tuple[bool, str]]:
    out = {}
    for member in split_top(body, ";"):
        name, _, tp = member.partition(":")
        out[name.strip().rstrip("?")] = (name.strip().endswith("?"), tp.strip())
    return out


class Checker:
    def __init__(self, doc: dict, interfaces: dict, aliases: dict) -> None:
        self.schemas = doc["components"]["schemas"]
        self.interfaces = interfaces
        self.aliases = aliases
        self.problems: list[str] = []
        self.seen: set[tuple[str, str]] = set()

    def resolve(self, schema: dict) -> dict:
        while "$ref" in schema:
            schema = self.schemas[schema["$ref"].rsplit("/", 1)[1]]
        return schema

    def alternatives(self, schema: dict) -> list[dict]:
        schema = self.resolve(schema)
        if "anyOf" in schema:
            return [alt for sub in schema["anyOf"] for alt in self.alternatives(sub)]
        return [schema]

    def ts_alternatives(self, tp: str) -> list[str]:
        out = []
        for alt in split_top(tp, "|"):
            out += self.ts_alternatives(self.aliases[alt]) if alt in self.aliases else [alt]
        return out

    def compare_object(self, where: str, ts_members: dict[str, tuple[bool, str]], schema: dict) -> None:
        schema = self.resolve(schema)
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        if set(ts_members) != set(props):
            self.problems.append(f"{where}: fields only in the .d.ts {sorted(set(ts_members) - set(props))}, "
                                 f"only in the schema {sorted(set(props) - set(ts_members))}")
        for name in sorted(set(ts_members) & set(props)):
            optional, tp = ts_members[name]
            if optional != (name not in required):
                self.problems.append(f"{where}.{name}: optional in the .d.ts is {optional}, "
                                     f"in the schema {name not in required}")
            self.compare_type(f"{where}.{name}", tp, props[name])

    def compare_type(self, where: str, tp: str, schema: dict) -> None:
        alts = self.alternatives(schema)
        if any(not ({"type", "enum", "properties", "items"} & set(a)) for a in alts) or tp == "unknown":
            return                                    # any JSON on one side: nothing to compare
        ts_alts = self.ts_alternatives(tp)
        kinds: dict[str, list] = {}
        for alt in ts_alts:
            if alt.startswith('"'):
                kinds.setdefault("enum", []).append(alt.strip('"'))
            elif alt in _PRIMITIVE:
                kinds.setdefault(_PRIMITIVE[alt], []).append(alt)
            elif alt.endswith("[]") or alt.startswith("["):
                kinds.setdefault("array", []).append(alt)
            else:
                kinds.setdefault("object", []).append(alt)
        want: dict[str, list] = {}
        for a in alts:
            if "enum" in a:
                want.setdefault("enum", []).extend(a["enum"])
                continue
            kind = {"integer": "number"}.get(a["type"], a["type"])
            want.setdefault(kind, []).append(a)
        if set(kinds) != set(want):
            self.problems.append(f"{where}: {tp!r} is {sorted(kinds)}, the schema {sorted(want)}")
            return
        if "enum" in kinds and sorted(kinds["enum"]) != sorted(want["enum"]):
            self.problems.append(f"{where}: values {sorted(kinds['enum'])}, the schema {sorted(want['enum'])}")
        for alt in kinds.get("array", []):
            items = want["array"][0].get("items") or want["array"][0].get("prefixItems", [{}])[0]
            inner = alt[:-2] if alt.endswith("[]") else split_top(alt[1:-1], ",")[0]
            self.compare_type(f"{where}[]", inner.strip("()"), items)
        for alt in kinds.get("object", []):
            target = want["object"][0]
            if "properties" not in target and "additionalProperties" not in target:
                continue                              # any object (the state, timed effects)
            if alt.startswith("Record<"):
                value = split_top(alt[len("Record<"):-1], ",")[1]
                if "additionalProperties" not in target:
                    self.problems.append(f"{where}: a Record, the schema an object with fixed fields")
                elif isinstance(target["additionalProperties"], dict):
                    self.compare_type(f"{where}{{}}", value, target["additionalProperties"])
            elif alt.startswith("{"):
                self.compare_object(where, members(alt[1:-1]), target)
            elif alt in self.interfaces:
                self.compare_object(f"{where} ({alt})", self.interfaces[alt], target)
            else:
                self.problems.append(f"{where}: unknown type {alt!r}")


def test_the_js_client_types_match_the_openapi_document():
    interfaces, aliases = parse_dts(DTS.read_text(encoding="utf-8"))
    checker = Checker(openapi_document(), interfaces, aliases)
    for ts_name, schema_name in ROOTS.items():
        checker.compare_object(ts_name, interfaces[ts_name], {"$ref": f"#/components/schemas/{schema_name}"})
    assert checker.problems == []


def test_the_checker_finds_a_drift():
    # the check must fail on the differences it exists to catch
    text = DTS.read_text(encoding="utf-8")
    interfaces, aliases = parse_dts(text)
    doc = openapi_document()
    drifted = {**interfaces, "STMessage": {**interfaces["STMessage"], "mes": (True, "number"), "extra": (False, "string")}}
    drifted["BookInfo"] = {k: v for k, v in interfaces["BookInfo"].items() if k != "losses"}
    checker = Checker(doc, drifted, {**aliases, "Tokenizer": '"cl100k" | "words"'})
    for ts_name, schema_name in ROOTS.items():
        checker.compare_object(ts_name, drifted[ts_name], {"$ref": f"#/components/schemas/{schema_name}"})
    text = "\n".join(checker.problems)
    assert "STScanRequest.messages[] (STMessage): fields only in the .d.ts ['extra']" in text
    assert "STScanRequest.messages[] (STMessage).mes: optional in the .d.ts is True" in text
    assert "STScanRequest.messages[] (STMessage).mes: 'number' is ['number'], the schema ['string']" in text
    assert "BookInfo: fields only in the .d.ts [], only in the schema ['losses']" in text
    assert "STScanRequest.tokenizer: values ['cl100k', 'words'], the schema ['chars', 'cl100k', 'words']" in text
