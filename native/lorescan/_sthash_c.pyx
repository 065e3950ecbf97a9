# cython: boundscheck=False, wraparound=False, cdivision=True
"""SillyTavern's cyrb53 over a string's UTF-16 code units. Twin: ``lorescan.js.sthash._cyrb53_py``.

A str is read in its own storage (one, two or four bytes a code point): a code point past
U+FFFF counts as its surrogate pair, a lone surrogate as the one code unit it is, exactly as
the twin counts them.
"""
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "Python.h":
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    int PyUnicode_KIND(object)
    void* PyUnicode_DATA(object)
    int PyUnicode_READY(object) except -1
    int PyUnicode_1BYTE_KIND
    int PyUnicode_2BYTE_KIND


def cyrb53(str text not None, unsigned long long seed=0):
    """SillyTavern's ``getStringHash``: 53-bit cyrb53 over the UTF-16 code units of ``text``."""
    cdef uint32_t h1 = <uint32_t>(0xDEADBEEF ^ <uint32_t>seed)
    cdef uint32_t h2 = <uint32_t>(0x41C6CE57 ^ <uint32_t>seed)
    cdef Py_ssize_t i, n
    cdef uint32_t c
    cdef int kind
    cdef const uint8_t* d1
    cdef const uint16_t* d2
    cdef const uint32_t* d4
    PyUnicode_READY(text)
    n = PyUnicode_GET_LENGTH(text)
    kind = PyUnicode_KIND(text)
    if kind == PyUnicode_1BYTE_KIND:
        d1 = <const uint8_t*>PyUnicode_DATA(text)
        for i in range(n):
            c = d1[i]
            h1 = (h1 ^ c) * <uint32_t>2654435761u
            h2 = (h2 ^ c) * <uint32_t>1597334677u
    elif kind == PyUnicode_2BYTE_KIND:
        d2 = <const uint16_t*>PyUnicode_DATA(text)
        for i in range(n):
            c = d2[i]
            h1 = (h1 ^ c) * <uint32_t>2654435761u
            h2 = (h2 ^ c) * <uint32_t>1597334677u
    else:
        d4 = <const uint32_t*>PyUnicode_DATA(text)
        for i in range(n):
            c = d4[i]
            if c > 0xFFFF:                 # astral: its surrogate pair
                c -= 0x10000
                h1 = (h1 ^ (0xD800 + (c >> 10))) * <uint32_t>2654435761u
                h2 = (h2 ^ (0xD800 + (c >> 10))) * <uint32_t>1597334677u
                c = 0xDC00 + (c & 0x3FF)
            h1 = (h1 ^ c) * <uint32_t>2654435761u
            h2 = (h2 ^ c) * <uint32_t>1597334677u
    cdef uint32_t a = ((h1 ^ (h1 >> 16)) * <uint32_t>2246822507u) ^ ((h2 ^ (h2 >> 13)) * <uint32_t>3266489909u)
    cdef uint32_t b = ((h2 ^ (h2 >> 16)) * <uint32_t>2246822507u) ^ ((a ^ (a >> 13)) * <uint32_t>3266489909u)
    return <uint64_t>4294967296 * (b & 0x1FFFFF) + a
