"""Lorebook file formats: one module per format (read, validate, write back).

``load`` reads any supported file (format detected from the content); ``convert`` writes a
book in a format and returns a :class:`LossReport` of what the target could not hold.
"""
from ._mapping import Loss, LossReport
from ._safety import DEFAULT_LIMITS, Limits
from .convert import TARGETS, convert, main_convert, write_bytes
from .load import detect_format, load, load_data
from .registry import FormatName
from .sillytavern import book_from_entries, read_world, write_world

__all__ = ["load", "load_data", "detect_format", "convert", "write_bytes", "main_convert", "TARGETS",
           "Loss", "LossReport", "Limits", "DEFAULT_LIMITS", "read_world", "write_world",
           "book_from_entries", "FormatName"]
