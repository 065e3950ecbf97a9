# What other kernels cimport from lorescan._hits_c.

cdef int scan_pass(str text, object automaton, const int[:] lengths, const int[:] free_vid,
                   const int[:] bound_vid, int model, set out) except -1
