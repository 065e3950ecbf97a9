"""Lorebook file formats: one module per format (read, validate, write back)."""
from .sillytavern import read_world, write_world

__all__ = ["read_world", "write_world"]
