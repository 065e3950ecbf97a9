# cython: boundscheck=False, wraparound=False
"""Per-text hit sets and window unions. Twin: src/lorescan/match/_hits_py.py."""
from lorescan._chars cimport MODEL_ASCII, MODEL_NOSPACE, occurrence_ok

from time import monotonic, sleep

from lorescan.match import _wordchars
from lorescan.errors import ScanDeadlineExceeded

cdef bytes _TABLE_BYTES = _wordchars.CHAR_TABLE
cdef const unsigned char* TABLE = _TABLE_BYTES
EMPTY = frozenset()


# Every YIELD_EVERY hits a pass lets other threads run (a Cython loop never reaches the
# interpreter's switch points) and checks the caller's deadline. Letting them run means
# sleeping briefly without the GIL (time.sleep releases it): a bare release and re-take
# (`with nogil: pass`) hands the GIL over only if the waiting thread is scheduled within that
# instant, and when YIELD_EVERY hits take less than the interpreter's switch interval (5 ms)
# the waiter never even asks for it, so on a fast machine the service's event loop (a
# /healthz) waited for the whole scan. YIELD_SLEEP is ~0.1 ms a 65,536 hits (~0.7 ms of
# work): only texts with that many hits pay it (the most in a real corpus text is 19,140).
cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX

cdef enum:
    YIELD_EVERY = 65536
cdef double YIELD_SLEEP = 0.0001


cdef Py_ssize_t scan_pass(str text, object automaton, const int[:] lengths, const int[:] free_vid,
                          const int[:] bound_vid, int model, set out, Py_ssize_t left,
                          object deadline) except -2:
    # One automaton pass: free variants are hit by any occurrence (the case filter is the
    # choice of tables for this pass), bounded ones by an occurrence with word boundaries.
    # At most ``left`` hits are taken: returns the hits still allowed, -1 when one more came.
    cdef Py_ssize_t end, pid, start, seen = 0
    cdef int v, b
    cdef tuple item
    for item in automaton.iter(text):
        if left == 0:
            return -1
        left -= 1
        seen += 1
        if seen % YIELD_EVERY == 0:
            sleep(YIELD_SLEEP)
            if deadline is not None and monotonic() > deadline:
                raise ScanDeadlineExceeded(f"the scan passed its deadline after {seen:,} key hits in one text")
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
    return left


def text_hits(str text, automaton, tables, int model, bint scan_raw, bint scan_lower):
    """The vids occurring in ``text`` (see the twin for the table layout)."""
    return bounded_text_hits(text, automaton, tables, model, scan_raw, scan_lower, -1, None)[0]


def bounded_text_hits(str text, automaton, tables, int model, bint scan_raw, bint scan_lower,
                      Py_ssize_t max_hits, deadline):
    """``(vids, cut)``: :func:`text_hits` from at most ``max_hits`` hits (< 0: all; see the twin)."""
    lengths, raw_free, raw_bound, low_free, low_bound = tables
    if model < MODEL_ASCII or model > MODEL_NOSPACE:
        raise ValueError(f"unknown word model {model!r}")
    cdef set out = set()
    cdef Py_ssize_t left = PY_SSIZE_T_MAX if max_hits < 0 else max_hits
    if scan_raw:
        left = scan_pass(text, automaton, lengths, raw_free, raw_bound, model, out, left, deadline)
    if scan_lower and left >= 0:
        left = scan_pass(text.lower(), automaton, lengths, low_free, low_bound, model, out, left, deadline)
    return (frozenset(out) if out else EMPTY), left < 0


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
    """Sorted entry indexes listed under any vid in ``hits``, plus ``always`` (a lazy table's
    built rows read from its ``_items`` dict, as the twin does)."""
    cdef set found = set(always)
    cdef dict built_rows
    built = getattr(vid_entries, "_items", None)
    if type(built) is dict:
        built_rows = built
        for v in hits:
            row = built_rows.get(v)
            found.update(row if row is not None else vid_entries[v])
        return sorted(found)
    for v in hits:
        found.update(vid_entries[v])
    return sorted(found)


def count_step(dict counts, added, removed):
    """Move a window's vid counts on by some texts (see the twin): False when the keys did not change."""
    cdef bint changed = False
    cdef object v, c
    cdef Py_ssize_t n
    for hits in added:
        for v in hits:
            c = counts.get(v)
            if c is None:
                changed = True
                counts[v] = 1
            else:
                counts[v] = <Py_ssize_t>c + 1
    for hits in removed:
        for v in hits:
            n = <Py_ssize_t>counts[v] - 1
            if n:
                counts[v] = n
            else:
                del counts[v]
                changed = True
    return changed
