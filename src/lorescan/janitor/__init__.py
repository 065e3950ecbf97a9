"""The JanitorAI script lorebook engine ("ADVANCED LORE BOOK SYSTEM v12"), run exactly
(docs/janitor-mode.md): one module per stage (normalise, terms, entries, scan, engine,
result, explain)."""
from __future__ import annotations

from .engine import JanitorEngine
from .result import Decision, JanitorError, JanitorResult

__all__ = ["JanitorEngine", "JanitorResult", "JanitorError", "Decision"]
