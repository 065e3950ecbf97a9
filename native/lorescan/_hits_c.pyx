# cython: boundscheck=False, wraparound=False
"""Per-text hit sets and window unions. Twin: src/lorescan/match/_hits_py.py."""
from lorescan._chars cimport MODEL_ASCII, MODEL_NOSPACE, occurrence_ok

from lorescan.match import _wordchars

cdef bytes _TABLE_BYTES = _wordchars.CHAR_TABLE
cdef const unsigned char* TABLE = _TABLE_BYTES
EMPTY = frozenset()


cdef int scan_pass(str text, object automaton, const int[:] lengths, const int[:] free_vid,
                   const int[:] bound_vid, int model, set out) except -1:
    # One automaton pass: free variants are hit by any occurrence (the case filter is the
    # choice of tables for this pass), bounded ones by an occurrence with word boundaries.
    cdef Py_ssize_t end, pid, start
    cdef int v, b
    cdef tuple item
    for item in automaton.iter(text):
        end = item[0]
        pid = item[1]
        v = free_vid[pid]
        if v >= 0:
            out.add(v)
        b = bound_vid[pid]
        if b >= 0 and b not in out:
            start = end - lengths[pid] + 1
            if occurrence_ok(text, start, end + 1, model, TABLE):
                out.add(b)
    return 0


def text_hits(str text, automaton, tables, int model, bint scan_raw, bint scan_lower):
    """The vids occurring in ``text`` (see the twin for the table layout)."""
    lengths, raw_free, raw_bound, low_free, low_bound = tables
    if model < MODEL_ASCII or model > MODEL_NOSPACE:
        raise ValueError(f"unknown word model {model!r}")
    cdef set out = set()
    if scan_raw:
        scan_pass(text, automaton, lengths, raw_free, raw_bound, model, out)
    if scan_lower:
        scan_pass(text.lower(), automaton, lengths, low_free, low_bound, model, out)
    return frozenset(out) if out else EMPTY


def window_union(parts):
    """The union of the hit sets of a window's texts."""
    cdef set out
    if not parts:
        return EMPTY
    if len(parts) == 1:
        return frozenset(parts[0])
    out = set()
    for p in parts:
        out.update(p)
    return frozenset(out) if out else EMPTY


def entries_hit(hits, vid_entries, always):
    """Sorted entry indexes listed under any vid in ``hits``, plus ``always``."""
    cdef set found = set(always)
    for v in hits:
        found.update(vid_entries[v])
    return sorted(found)
