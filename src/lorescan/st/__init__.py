"""SillyTavern mode, one module per stage of a turn.

``settings`` (STSettings, Compat) and ``result`` (inputs and results) are plain data;
``compiled`` is a book compiled once (its ``CompiledKeys`` and per-entry columns; ``lsc`` its
part of the compact form); ``tables`` is what an engine precomputes; ``turn`` the state of one scan; ``engine`` builds
the tables and runs a scan through ``timed`` (effects from earlier turns), ``activate`` (the
loop and its gates), ``groups``, ``budget`` (probability and admission), ``place`` and
``explain`` (diagnostics).

The names below are imported on first use (PEP 562), so ``import lorescan.st`` costs
nothing until a name is used. The decorator lines (``@@activate``, ``@@dont_activate``)
are read by ``js.stdecorators``, below both engines and ``compiled``.
"""
from __future__ import annotations

import importlib

# public name -> the module (relative to this package) that defines it
_LAZY = {
    "STEngine": ".engine",
    "STResult": ".result", "Diagnostic": ".result", "LoopRecord": ".result", "BookSource": ".result",
    "Character": ".result", "ChatMessage": ".result", "EntryId": ".result", "ROLES": ".result",
    "DiagnosticOutcome": ".result", "Reason": ".result", "LoopState": ".result", "Role": ".result", "KeySpan": ".result",
    "Placement": ".place", "DepthGroup": ".place", "Position": ".place", "POSITION_NAMES": ".place",
    "STSettings": ".settings", "Compat": ".settings", "Trigger": ".settings", "InsertionStrategy": ".settings",
    "GENERATION_TRIGGERS": ".settings",
    "SelectiveLogic": "..model",
    "TimedEffects": ".timed", "EffectRecord": ".timed",
}

__all__ = list(_LAZY)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .engine import STEngine
    from .place import POSITION_NAMES, DepthGroup, Placement, Position
    from .result import (ROLES, BookSource, Character, ChatMessage, Diagnostic, EntryId, KeySpan, LoopRecord,
                         DiagnosticOutcome, LoopState, Reason, Role, STResult)
    from .settings import GENERATION_TRIGGERS, Compat, InsertionStrategy, STSettings, Trigger
    from ..model import SelectiveLogic
    from .timed import EffectRecord, TimedEffects


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if name == "Outcome":             # the old name, which slot mode's log outcome also had
        import warnings
        warnings.warn("lorescan.st.Outcome was renamed DiagnosticOutcome (lorescan.slot.Outcome is slot mode's "
                      "log outcome)", DeprecationWarning, stacklevel=2)
        module, name = ".result", "DiagnosticOutcome"
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
