# cython: boundscheck=False, wraparound=False
"""Whole-word and case filters over automaton hits. Twin: src/lorescan/_wordscan_py.py."""
from lorescan._chars cimport MODEL_ASCII, MODEL_NOSPACE, occurrence_ok

from lorescan import _wordscan_py

cdef bytes _TABLE_BYTES = _wordscan_py.CHAR_TABLE
cdef const unsigned char* TABLE = _TABLE_BYTES


cdef int _check_model(int model) except -1:
    if model < MODEL_ASCII or model > MODEL_NOSPACE:
        raise ValueError(f"unknown word model {model!r}")
    return 0


def boundary_ok(str text, Py_ssize_t start, Py_ssize_t end, int model):
    """True when the occurrence ``text[start:end]`` (non-empty) has word boundaries at both ends."""
    _check_model(model)
    if not (0 <= start < end <= len(text)):
        raise IndexError(f"bad occurrence [{start}, {end}) in a text of length {len(text)}")
    return bool(occurrence_ok(text, start, end, model, TABLE))


def whole_word_hits(str text, list hits, lengths, int model):
    """Pattern ids with at least one occurrence bounded by word boundaries, in first-hit order."""
    _check_model(model)
    cdef list kept = []
    cdef set done = set()
    cdef Py_ssize_t end, start, n = len(text)
    for end, pid in hits:
        if pid in done:
            continue
        start = end - <Py_ssize_t>lengths[pid] + 1
        if not (0 <= start < end + 1 <= n):
            raise IndexError(f"bad occurrence [{start}, {end + 1}) in a text of length {n}")
        if occurrence_ok(text, start, end + 1, model, TABLE):
            done.add(pid)
            kept.append(pid)
    return kept


def case_filter(list hits, free_vid, bound_vid):
    """Split one pass's hits by the variants of that pass's case class (see the twin)."""
    cdef list free = [], bounded = []
    cdef set seen = set()
    cdef Py_ssize_t pid
    for hit in hits:
        pid = hit[1]
        v = free_vid[pid]
        if v >= 0 and v not in seen:
            seen.add(v)
            free.append(v)
        if bound_vid[pid] >= 0:
            bounded.append(hit)
    return free, bounded
