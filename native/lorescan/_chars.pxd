# Shared inline helpers: one definition of "word character" and "boundary" for every kernel.
# Class bits come from lorescan.match._wordchars.CHAR_TABLE (BMP) or its char_class() (astral),
# which derive them from lorescan.js.text, the single source of truth.

cdef enum:
    ASCII_WORD = 1
    UNICODE_WORD = 2
    NOSPACE = 4
    MODEL_ASCII = 0
    MODEL_UNICODE = 1
    MODEL_NOSPACE = 2


cdef inline int char_class(Py_UCS4 ch, const unsigned char* table) except -1:
    if ch < 0x10000:
        return table[ch]
    from lorescan.match._wordchars import char_class as py_char_class
    return py_char_class(<long>ch)


cdef inline int side_ok(Py_UCS4 outer, Py_UCS4 inner, int model, const unsigned char* table) except -1:
    # The character outside the occurrence must not be a word character; under nospace, a
    # no-space script on either side is a boundary too (docs/sillytavern-mode.md#st-plain-keys,
    # docs/improved-profile.md#word-chars and #nospace-scripts).
    cdef int co = char_class(outer, table)
    if model == MODEL_ASCII:
        return (co & ASCII_WORD) == 0
    if (co & UNICODE_WORD) == 0:
        return 1
    return model == MODEL_NOSPACE and ((co | char_class(inner, table)) & NOSPACE) != 0


cdef inline int occurrence_ok(str text, Py_ssize_t start, Py_ssize_t end, int model,
                              const unsigned char* table) except -1:
    # [start, end) non-empty and inside text (checked by callers)
    if start > 0 and not side_ok(text[start - 1], text[start], model, table):
        return 0
    return end == len(text) or side_ok(text[end], text[end - 1], model, table)
